// Data files of --data / --calib / --eval: plain text, JSONL, CSV (any column) and .npy ids.
// Input byte 0 chooses the format; the rest is the file.
#include "fuzz_common.hpp"
#include "sinkscope/io/dataset.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    static const char* const kExt[] = {"txt", "jsonl", "csv", "npy"};
    const char* ext = kExt[data[0] % 4];
    const std::string_view rest = fuzz::as_view(data + 1, size - 1);
    const auto path = fuzz::write_file(fuzz::scratch_dir() / (std::string("data.") + ext), rest);
    fuzz::expect_clean([&] { (void)io::load_dataset(path); });
    if (data[0] % 4 == 2) {
        fuzz::expect_clean([&] {
            io::DatasetOptions o;
            o.text_column = "prompt";
            o.max_samples = 3;
            (void)io::load_dataset(path, o);
        });
        fuzz::expect_clean([&] { (void)io::parse_csv(std::string(rest)); });
    }
    return 0;
}
