// Images for vision models (ViT), torch-free: PNG (libpng) and .npy float images, the image sets a
// --data path names (one PNG, a directory of PNGs, a .npy image or stack), and the Hugging Face
// ViTImageProcessor preprocessing of preprocessor_config.json (resize, rescale, normalise).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sinkscope::io {

// A decoded image, channels first.
struct Image {
    // What the values mean. Levels: 8-bit levels 0..255 as decoded from a PNG (the processor's
    // rescale_factor applies). Unit: floats in [0, 1] (.npy images; rescaling is skipped because
    // they are already rescaled, where HF would rescale them a second time).
    enum class Range { Levels, Unit };

    int64_t channels = 0;
    int64_t height = 0;
    int64_t width = 0;
    std::vector<float> data;  // [channels, height, width]
    Range range = Range::Levels;
    std::string source;  // file (and index within a stack) for error messages

    float at(int64_t c, int64_t y, int64_t x) const {
        return data[size_t((c * height + y) * width + x)];
    }
};

// PNG: 8-bit (or 16-bit, reduced to its high byte) gray, gray+alpha, RGB, RGBA or palette
// (expanded to RGB, RGBA when it has transparency). Channels are the file's own (1, 2, 3 or 4);
// gAMA/sRGB chunks are ignored, like PIL. Corrupt or truncated files: InputError naming the file.
Image read_png(const std::filesystem::path& path);
// Writes an 8-bit PNG of a Levels image with 1 (gray), 2, 3 (RGB) or 4 (RGBA) channels; values
// are rounded and clamped to 0..255.
void write_png(const std::filesystem::path& path, const Image& image);

// .npy float images (f2/f4/f8) with values in [0, 1]: [C, H, W] or [H, W, C] (channels first
// when dim 0 is 1, 3 or 4, else channels last when the last dim is, as HF's
// infer_channel_dimension_format), or a stack [N, C, H, W]. InputError naming the file otherwise
// (wrong rank or dtype, values outside [0, 1] or not finite).
std::vector<Image> read_npy_images(const std::filesystem::path& path);

// The images a --data path names: a .png file, a directory of .png files (sorted by name) or a
// .npy image / stack. Files are decoded on demand (get), so a large set is never held whole.
class ImageSet {
public:
    // Throws InputError naming the path when it is none of these or holds no image.
    static ImageSet open(const std::filesystem::path& path, int64_t max_samples = 0);
    size_t size() const { return n_; }
    Image get(size_t k) const;
    // The files read (for hashes in run records).
    const std::vector<std::filesystem::path>& files() const { return files_; }

private:
    std::vector<std::filesystem::path> files_;  // PNG files, or the one .npy file
    std::vector<Image> stack_;                  // .npy: every image (already in memory)
    size_t n_ = 0;
};

// Hugging Face ViTImageProcessor settings (preprocessor_config.json). Defaults are those of a
// model directory without the file: no resize, no rescale, no normalisation; the image must then
// already have the model's size and channels.
struct ImageProcessor {
    bool do_convert_rgb = true;  // gray / gray+alpha / RGBA -> RGB when the model wants 3 channels
    bool do_resize = false;
    int64_t height = 0, width = 0;  // size {"height", "width"}
    int resample = 2;               // PIL code; only 2 (bilinear) is implemented
    bool do_rescale = false;
    double rescale_factor = 1.0 / 255.0;
    bool do_normalize = false;
    std::vector<double> image_mean, image_std;       // one per channel (or one for all)
    std::string origin = "default image processor";  // the config file, for messages

    // Reads preprocessor_config.json; InputError / UnsupportedError naming it.
    static ImageProcessor from_file(const std::filesystem::path& path);

    // HF order: convert_rgb, resize, rescale, normalise. Returns float [n_channels, image_size,
    // image_size] (the model's pixel_values). InputError naming image.source when the image's
    // size or channels do not fit and no resize / conversion applies.
    std::vector<float> preprocess(const Image& image, int64_t n_channels, int64_t image_size) const;
};

// PIL's bilinear resize (Image.resize(..., BILINEAR), the filter HF's ViTImageProcessor uses):
// separable triangle filter whose support widens with the downscale factor (antialiasing),
// horizontal pass first. Levels images are rounded to 0..255 after each pass as PIL does with
// 8-bit images (PIL uses fixed-point weights, so a level may still differ by 1 in rare cases).
Image resize_bilinear(const Image& image, int64_t height, int64_t width);

}  // namespace sinkscope::io
