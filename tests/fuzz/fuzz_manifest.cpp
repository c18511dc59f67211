// Checkpoint manifests of `dynamics --checkpoints`: JSON or CSV (byte 0 chooses); the rest is the
// file, in a scratch folder where the relative path "." exists.
#include "fuzz_common.hpp"
#include "sinkscope/io/manifest.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const char* name = data[0] % 2 ? "manifest.csv" : "manifest.json";
    const auto path =
        fuzz::write_file(fuzz::scratch_dir() / name, fuzz::as_view(data + 1, size - 1));
    fuzz::expect_clean([&] { (void)io::read_manifest(path); });
    return 0;
}
