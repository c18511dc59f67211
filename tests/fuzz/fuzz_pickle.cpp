// PyTorch checkpoints: the restricted unpickler over data.pkl bytes, and (input starting with
// "PK") a whole zip archive (pytorch_model.bin) with its storages read as tensors.
#include "fuzz_common.hpp"
#include "sinkscope/io/torch_pickle.hpp"
#include "sinkscope/io/weights.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes = fuzz::as_view(data, size);
    if (bytes.starts_with("PK")) {
        const auto path = fuzz::write_file(fuzz::scratch_dir() / "pytorch_model.bin", bytes);
        fuzz::expect_clean([&] { fuzz::read_tensors(*io::open_pytorch_bin(path)); });
        return 0;
    }
    fuzz::expect_clean([&] { (void)io::unpickle_state_dict(data, size, "data.pkl"); });
    return 0;
}
