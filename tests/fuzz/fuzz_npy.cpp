// .npy arrays (--attention files, dumps, images) and .npz archives (zip of .npy members).
#include "fuzz_common.hpp"
#include "sinkscope/io/image.hpp"
#include "sinkscope/io/npy.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes = fuzz::as_view(data, size);
    if (bytes.starts_with("PK")) {
        const auto path = fuzz::write_file(fuzz::scratch_dir() / "input.npz", bytes);
        fuzz::expect_clean([&] { (void)io::read_npz(path); });
        return 0;
    }
    fuzz::expect_clean([&] { (void)io::parse_npy(data, size, "input.npy"); });
    const auto path = fuzz::write_file(fuzz::scratch_dir() / "input.npy", bytes);
    fuzz::expect_clean([&] { (void)io::read_npy(path); });
    fuzz::expect_clean([&] { (void)io::read_npy_images(path); });
    return 0;
}
