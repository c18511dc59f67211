// PNG images (vision models' inputs) through the ViT preprocessing, and the image processor's
// preprocessor_config.json. Input: a PNG; or, when it starts with '{', a preprocessor config
// applied to a small fixed image.
#include "fuzz_common.hpp"
#include "sinkscope/io/image.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes = fuzz::as_view(data, size);
    if (bytes.starts_with("{")) {
        const auto path = fuzz::write_file(fuzz::scratch_dir() / "preprocessor_config.json", bytes);
        fuzz::expect_clean([&] {
            const auto proc = io::ImageProcessor::from_file(path);
            io::Image image;
            image.height = 5;
            image.width = 7;
            image.channels = 3;
            image.data.assign(size_t(5 * 7 * 3), 0.5f);
            image.range = io::Image::Range::Unit;
            image.source = "fixed.png";
            (void)proc.preprocess(image, 3, 8);
        });
        return 0;
    }
    const auto path = fuzz::write_file(fuzz::scratch_dir() / "image.png", bytes);
    fuzz::expect_clean([&] {
        const io::Image image = io::read_png(path);
        if (image.height * image.width <= 4096) {
            io::ImageProcessor proc;
            proc.do_resize = true;
            proc.height = proc.width = 8;
            (void)proc.preprocess(image, 3, 8);
        }
    });
    return 0;
}
