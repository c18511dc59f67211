// Image reading (PNG through libpng, .npy float images) and the ViTImageProcessor preprocessing
// (image.hpp). Every length read from a file is checked before it is used.
#include "sinkscope/io/image.hpp"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/npy.hpp"

namespace sinkscope::io {

namespace fs = std::filesystem;

namespace {

// ---- PNG decoding ------------------------------------------------------------------------------
// libpng reports errors by longjmp; everything that must survive it lives in PngRead, owned by the
// caller, and the function holding setjmp has no objects with destructors.
struct PngRead {
    const uint8_t* bytes = nullptr;
    size_t size = 0;
    size_t pos = 0;
    char message[256] = {0};
    uint32_t width = 0, height = 0;
    int channels = 0;
    std::vector<uint8_t> pixels;  // [height, width, channels] after the transforms
    std::vector<png_bytep> rows;
};

void png_fail(png_structp png, png_const_charp msg) {
    auto* r = static_cast<PngRead*>(png_get_error_ptr(png));
    std::snprintf(r->message, sizeof r->message, "%s", msg);
    png_longjmp(png, 1);
}

void png_quiet(png_structp, png_const_charp) {}

void png_read_memory(png_structp png, png_bytep out, png_size_t n) {
    auto* r = static_cast<PngRead*>(png_get_io_ptr(png));
    if (n > r->size - r->pos) png_error(png, "file is truncated");
    std::memcpy(out, r->bytes + r->pos, n);
    r->pos += n;
}

// Returns false with r->message set on any libpng error.
bool decode_png(PngRead* r) {
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, png_fail, png_quiet);
    if (!png) {
        std::snprintf(r->message, sizeof r->message, "libpng could not start");
        return false;
    }
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, nullptr, nullptr);
        std::snprintf(r->message, sizeof r->message, "libpng could not start");
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, nullptr);
        return false;
    }
    png_set_read_fn(png, r, png_read_memory);
    png_read_info(png, info);
    const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    // read_png checked the IHDR's size against the limit; libpng read the same one.
    if (w != r->width || h != r->height) png_error(png, "image size differs from its IHDR");
    const int color = png_get_color_type(png, info);
    if (png_get_bit_depth(png, info) == 16) png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    r->channels = png_get_channels(png, info);
    const size_t row_bytes = png_get_rowbytes(png, info);
    if (row_bytes != size_t(w) * size_t(r->channels)) png_error(png, "unexpected row layout");
    r->pixels.resize(row_bytes * h);
    r->rows.resize(h);
    for (png_uint_32 y = 0; y < h; ++y) r->rows[y] = r->pixels.data() + size_t(y) * row_bytes;
    png_read_image(png, r->rows.data());
    png_read_end(png, nullptr);
    png_destroy_read_struct(&png, &info, nullptr);
    return true;
}

std::string lower_ext(const fs::path& p) {
    std::string e = p.extension().string();
    std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
    return e;
}

// PIL's triangle-filter resampling coefficients along one axis (Resample.c precompute_coeffs).
struct Coeffs {
    std::vector<int64_t> first;  // first input index of each output index
    std::vector<std::vector<double>> w;
};

Coeffs bilinear_coeffs(int64_t in_size, int64_t out_size) {
    const double scale = double(in_size) / double(out_size);
    const double filterscale = std::max(scale, 1.0);
    const double support = 1.0 * filterscale;  // bilinear support 1
    Coeffs c;
    for (int64_t o = 0; o < out_size; ++o) {
        const double center = (double(o) + 0.5) * scale;
        const int64_t lo = std::max<int64_t>(int64_t(center - support + 0.5), 0);
        const int64_t hi = std::min<int64_t>(int64_t(center + support + 0.5), in_size);
        std::vector<double> w;
        double sum = 0;
        for (int64_t i = lo; i < hi; ++i) {
            const double x = std::fabs((double(i) - center + 0.5) / filterscale);
            const double v = x < 1.0 ? 1.0 - x : 0.0;
            w.push_back(v);
            sum += v;
        }
        if (sum != 0)
            for (double& v : w) v /= sum;
        c.first.push_back(lo);
        c.w.push_back(std::move(w));
    }
    return c;
}

float clamp_level(double v) {
    return float(std::clamp(std::round(v), 0.0, 255.0));
}

// gray (1), gray+alpha (2), RGB (3), RGBA (4) -> RGB as PIL's convert("RGB"): gray replicated,
// alpha dropped.
Image to_rgb(const Image& in) {
    if (in.channels == 3) return in;
    Image out = in;
    out.channels = 3;
    out.data.assign(size_t(3 * in.height * in.width), 0.0f);
    const size_t plane = size_t(in.height * in.width);
    for (int64_t c = 0; c < 3; ++c) {
        const int64_t from = in.channels >= 3 ? c : 0;
        std::copy_n(in.data.begin() + ptrdiff_t(size_t(from) * plane), plane,
                    out.data.begin() + ptrdiff_t(size_t(c) * plane));
    }
    return out;
}

bool json_flag(const nlohmann::json& j, const char* key, bool fallback, const std::string& file) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    SS_CHECK_INPUT(j[key].is_boolean(), file, "key '", key, "' is not a boolean");
    return j[key].get<bool>();
}

std::vector<double> json_numbers(const nlohmann::json& j, const char* key,
                                 const std::string& file) {
    if (!j.contains(key) || j[key].is_null()) return {};
    const auto& v = j[key];
    if (v.is_number()) return {v.get<double>()};
    SS_CHECK_INPUT(v.is_array() && !v.empty(), file, "key '", key, "' is not a list of numbers");
    std::vector<double> out;
    for (const auto& x : v) {
        SS_CHECK_INPUT(x.is_number(), file, "key '", key, "' is not a list of numbers");
        out.push_back(x.get<double>());
    }
    return out;
}

}  // namespace

Image read_png(const fs::path& path) {
    const std::string file = path.string();
    const std::string bytes = read_file(path);
    static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    SS_CHECK_INPUT(bytes.size() >= 8 && std::memcmp(bytes.data(), kSignature, 8) == 0, file,
                   "not a PNG file (bad signature)");
    // The size comes from the IHDR chunk, which the PNG specification (11.2.2) puts first: 4-byte
    // length 13, "IHDR", then width and height as big-endian uint32. Checked against the limit
    // before libpng allocates anything for the pixels.
    SS_CHECK_INPUT(bytes.size() >= 33 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0, file,
                   "corrupt PNG: the first chunk is not IHDR");
    auto be32 = [&](size_t at) {
        const auto* b = reinterpret_cast<const uint8_t*>(bytes.data()) + at;
        return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
    };
    PngRead r;
    r.width = be32(16);
    r.height = be32(20);
    check_limit(file, Limit::ImagePixels,
                "PNG of " + std::to_string(r.width) + "x" + std::to_string(r.height) + ": pixels",
                uint64_t(r.width) * uint64_t(r.height));
    r.bytes = reinterpret_cast<const uint8_t*>(bytes.data());
    r.size = bytes.size();
    if (!decode_png(&r)) throw InputError(file, std::string("corrupt PNG: ") + r.message);
    Image img;
    img.channels = r.channels;
    img.height = r.height;
    img.width = r.width;
    img.range = Image::Range::Levels;
    img.source = file;
    img.data.resize(size_t(img.channels * img.height * img.width));
    for (int64_t y = 0; y < img.height; ++y)  // [H, W, C] bytes -> [C, H, W] floats
        for (int64_t x = 0; x < img.width; ++x)
            for (int64_t c = 0; c < img.channels; ++c)
                img.data[size_t((c * img.height + y) * img.width + x)] =
                    r.pixels[size_t((y * img.width + x) * img.channels + c)];
    return img;
}

void write_png(const fs::path& path, const Image& image) {
    const std::string file = path.string();
    SS_CHECK(image.channels >= 1 && image.channels <= 4, "write_png: ", image.channels,
             " channels");
    SS_CHECK(image.data.size() == size_t(image.channels * image.height * image.width),
             "write_png: data size");
    std::vector<uint8_t> hwc(image.data.size());
    for (int64_t y = 0; y < image.height; ++y)
        for (int64_t x = 0; x < image.width; ++x)
            for (int64_t c = 0; c < image.channels; ++c)
                hwc[size_t((y * image.width + x) * image.channels + c)] =
                    uint8_t(clamp_level(image.at(c, y, x)));
    png_image out;
    std::memset(&out, 0, sizeof out);
    out.version = PNG_IMAGE_VERSION;
    out.width = png_uint_32(image.width);
    out.height = png_uint_32(image.height);
    static const png_uint_32 kFormats[4] = {PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB,
                                            PNG_FORMAT_RGBA};
    out.format = kFormats[image.channels - 1];
    if (!png_image_write_to_file(&out, file.c_str(), 0, hwc.data(), 0, nullptr))
        throw IoError(file, std::string("cannot write PNG: ") + out.message);
    png_image_free(&out);
}

std::vector<Image> read_npy_images(const fs::path& path) {
    const std::string file = path.string();
    const NpyArray a = read_npy(path);
    SS_CHECK_INPUT(a.dtype == DType::F16 || a.dtype == DType::F32 || a.dtype == DType::F64, file,
                   "images must be float (f2, f4 or f8) with values in [0, 1], found ",
                   dtype_descr(a.dtype));
    const auto& s = a.shape;
    auto is_channels = [](int64_t d) { return d == 1 || d == 3 || d == 4; };
    int64_t n = 1, c = 0, h = 0, w = 0;
    bool channels_last = false;
    if (s.size() == 3 || s.size() == 4) {
        const size_t o = s.size() - 3;  // offset of the image dims
        if (s.size() == 4) n = s[0];
        if (is_channels(s[o])) {
            c = s[o], h = s[o + 1], w = s[o + 2];
        } else if (is_channels(s[o + 2])) {
            h = s[o], w = s[o + 1], c = s[o + 2];
            channels_last = true;
        }
    }
    SS_CHECK_INPUT(c > 0 && h > 0 && w > 0 && n > 0, file,
                   "images must be shaped [C, H, W], [H, W, C] or [N, C, H, W] with C in "
                   "{1, 3, 4}, found rank ",
                   s.size());
    check_limit(file, Limit::ImagePixels,
                "image of " + std::to_string(h) + "x" + std::to_string(w) + ": pixels",
                uint64_t(h) * uint64_t(w));
    const std::vector<double> v = a.to_f64();
    std::vector<Image> out;
    for (int64_t k = 0; k < n; ++k) {
        Image img;
        img.channels = c;
        img.height = h;
        img.width = w;
        img.range = Image::Range::Unit;
        img.source = s.size() == 4 ? file + "[" + std::to_string(k) + "]" : file;
        img.data.resize(size_t(c * h * w));
        const double* src = v.data() + k * c * h * w;
        for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t y = 0; y < h; ++y)
                for (int64_t x = 0; x < w; ++x) {
                    const double p =
                        channels_last ? src[(y * w + x) * c + ch] : src[(ch * h + y) * w + x];
                    SS_CHECK_INPUT(std::isfinite(p) && p >= 0.0 && p <= 1.0, img.source,
                                   "pixel values must be in [0, 1] (an image, not normalised "
                                   "pixel_values), found ",
                                   p);
                    img.data[size_t((ch * h + y) * w + x)] = float(p);
                }
        out.push_back(std::move(img));
    }
    return out;
}

ImageSet ImageSet::open(const fs::path& path, int64_t max_samples) {
    const std::string p = path.string();
    SS_CHECK_INPUT(fs::exists(path), p, "no such file or directory");
    ImageSet set;
    if (fs::is_directory(path)) {
        for (const auto& e : fs::directory_iterator(path))
            if (e.is_regular_file() && lower_ext(e.path()) == ".png")
                set.files_.push_back(e.path());
        std::sort(set.files_.begin(), set.files_.end());
        SS_CHECK_INPUT(!set.files_.empty(), p, "directory holds no .png image");
        if (max_samples > 0 && int64_t(set.files_.size()) > max_samples)
            set.files_.resize(size_t(max_samples));
        set.n_ = set.files_.size();
        return set;
    }
    const std::string ext = lower_ext(path);
    if (ext == ".png") {
        set.files_ = {path};
        set.n_ = 1;
    } else if (ext == ".npy") {
        set.files_ = {path};
        set.stack_ = read_npy_images(path);
        if (max_samples > 0 && int64_t(set.stack_.size()) > max_samples)
            set.stack_.resize(size_t(max_samples));
        set.n_ = set.stack_.size();
    } else {
        throw InputError(p,
                         "images must be a .png file, a directory of .png files or a .npy "
                         "float image / stack");
    }
    return set;
}

Image ImageSet::get(size_t k) const {
    SS_CHECK(k < n_, "image index ", k, " of ", n_);
    if (!stack_.empty()) return stack_[k];
    return read_png(files_[k]);
}

ImageProcessor ImageProcessor::from_file(const fs::path& path) {
    const std::string file = path.string();
    const nlohmann::json j = read_json_file(path);
    SS_CHECK_INPUT(j.is_object(), file, "not a JSON object");
    ImageProcessor p;
    p.origin = file;
    // HF's ViTImageProcessor defaults apply to keys the file leaves out.
    p.do_convert_rgb = json_flag(j, "do_convert_rgb", true, file);
    p.do_resize = json_flag(j, "do_resize", true, file);
    p.do_rescale = json_flag(j, "do_rescale", true, file);
    p.do_normalize = json_flag(j, "do_normalize", true, file);
    p.height = p.width = 224;
    if (j.contains("size") && !j["size"].is_null()) {
        const auto& s = j["size"];
        if (s.is_number_integer()) {
            p.height = p.width = s.get<int64_t>();
        } else {
            SS_CHECK_INPUT(s.is_object(), file, "key 'size' is not an object");
            if (!s.contains("height") || !s.contains("width"))
                throw UnsupportedError(file, "size without height and width (e.g. shortest_edge)");
            SS_CHECK_INPUT(s["height"].is_number_integer() && s["width"].is_number_integer(), file,
                           "size height/width are not integers");
            p.height = s["height"].get<int64_t>();
            p.width = s["width"].get<int64_t>();
        }
    }
    SS_CHECK_INPUT(p.height > 0 && p.width > 0, file, "size must be positive");
    check_limit(file, Limit::ImagePixels,
                "size " + std::to_string(p.height) + "x" + std::to_string(p.width) + ": pixels",
                uint64_t(p.height) * uint64_t(p.width));
    if (j.contains("resample") && !j["resample"].is_null()) {
        SS_CHECK_INPUT(j["resample"].is_number_integer(), file, "key 'resample' is not an integer");
        p.resample = j["resample"].get<int>();
    }
    if (j.contains("rescale_factor") && !j["rescale_factor"].is_null()) {
        SS_CHECK_INPUT(j["rescale_factor"].is_number(), file,
                       "key 'rescale_factor' is not a number");
        p.rescale_factor = j["rescale_factor"].get<double>();
    }
    p.image_mean = json_numbers(j, "image_mean", file);
    p.image_std = json_numbers(j, "image_std", file);
    if (p.image_mean.empty()) p.image_mean = {0.5, 0.5, 0.5};  // IMAGENET_STANDARD_MEAN
    if (p.image_std.empty()) p.image_std = {0.5, 0.5, 0.5};
    for (double s : p.image_std) SS_CHECK_INPUT(s != 0.0, file, "image_std has a zero");
    return p;
}

Image resize_bilinear(const Image& in, int64_t height, int64_t width) {
    SS_CHECK(height > 0 && width > 0, "resize to ", height, "x", width);
    const bool levels = in.range == Image::Range::Levels;
    auto finish = [&](double v) { return levels ? clamp_level(v) : float(v); };
    // Horizontal pass: [C, H, in.width] -> [C, H, width].
    Image mid = in;
    if (width != in.width) {
        const Coeffs cx = bilinear_coeffs(in.width, width);
        mid.width = width;
        mid.data.assign(size_t(in.channels * in.height * width), 0.0f);
        for (int64_t c = 0; c < in.channels; ++c)
            for (int64_t y = 0; y < in.height; ++y)
                for (int64_t x = 0; x < width; ++x) {
                    double acc = 0;
                    for (size_t i = 0; i < cx.w[size_t(x)].size(); ++i)
                        acc += cx.w[size_t(x)][i] * in.at(c, y, cx.first[size_t(x)] + int64_t(i));
                    mid.data[size_t((c * in.height + y) * width + x)] = finish(acc);
                }
    }
    if (height == in.height) return mid;
    // Vertical pass: [C, in.height, width] -> [C, height, width].
    const Coeffs cy = bilinear_coeffs(in.height, height);
    Image out = mid;
    out.height = height;
    out.data.assign(size_t(in.channels * height * width), 0.0f);
    for (int64_t c = 0; c < in.channels; ++c)
        for (int64_t y = 0; y < height; ++y)
            for (int64_t x = 0; x < width; ++x) {
                double acc = 0;
                for (size_t i = 0; i < cy.w[size_t(y)].size(); ++i)
                    acc += cy.w[size_t(y)][i] * mid.at(c, cy.first[size_t(y)] + int64_t(i), x);
                out.data[size_t((c * height + y) * width + x)] = finish(acc);
            }
    return out;
}

std::vector<float> ImageProcessor::preprocess(const Image& image, int64_t n_channels,
                                              int64_t image_size) const {
    const std::string& src = image.source;
    // 1. Channels (PIL convert("RGB") when asked and the model reads RGB).
    Image img = image;
    if (img.channels != n_channels && do_convert_rgb && n_channels == 3) img = to_rgb(img);
    SS_CHECK_INPUT(img.channels == n_channels, src, "image has ", image.channels,
                   " channels, the model expects ", n_channels);
    // 2. Resize (only when the size differs: PIL would return the same pixels). A size other
    // than the model's is refused first, before any pixel of it is computed.
    SS_CHECK_INPUT(!do_resize || (height == image_size && width == image_size), origin, "size ",
                   height, "x", width, " differs from the model's image size ", image_size, "x",
                   image_size);
    if (do_resize && (img.height != height || img.width != width)) {
        if (resample != 2)
            throw UnsupportedError(origin, "resample " + std::to_string(resample) +
                                               " (only 2 = bilinear is implemented)");
        img = resize_bilinear(img, height, width);
    }
    SS_CHECK_INPUT(img.height == image_size && img.width == image_size, src, "image is ",
                   img.height, "x", img.width, (do_resize ? " after resizing" : ""),
                   ", the model expects ", image_size, "x", image_size,
                   (do_resize ? "" : " (no resize in the image processor)"));
    // 3. Rescale (8-bit levels only, see Image::Range) and 4. normalise, per channel; float32
    // like HF's processor output.
    const bool rescale = do_rescale && img.range == Image::Range::Levels;
    const size_t plane = size_t(img.height * img.width);
    auto per_channel = [&](const std::vector<double>& v, int64_t c, const char* what) {
        SS_CHECK_INPUT(v.size() == 1 || int64_t(v.size()) == n_channels, origin, what, " has ",
                       v.size(), " entries, the model has ", n_channels, " channels");
        return v.size() == 1 ? v[0] : v[size_t(c)];
    };
    std::vector<float> out(img.data.size());
    for (int64_t c = 0; c < n_channels; ++c) {
        const double mean = do_normalize ? per_channel(image_mean, c, "image_mean") : 0.0;
        const double std = do_normalize ? per_channel(image_std, c, "image_std") : 1.0;
        for (size_t i = 0; i < plane; ++i) {
            float v = img.data[size_t(c) * plane + i];
            if (rescale) v = float(double(v) * rescale_factor);
            if (do_normalize) v = float((double(v) - mean) / std);
            out[size_t(c) * plane + i] = v;
        }
    }
    return out;
}

}  // namespace sinkscope::io
