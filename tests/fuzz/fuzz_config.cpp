// Model configurations: Hugging Face config.json of every family in the registry (RoPE scaling
// included), and the GGUF metadata a model's configuration is read from (input starting with
// "GGUF"). Links the torch-free part of the model module (sinkscope_model_config).
#include "fuzz_common.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/model/config.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes = fuzz::as_view(data, size);
    if (bytes.starts_with("GGUF")) {
        const auto path = fuzz::write_file(fuzz::scratch_dir() / "model.gguf", bytes);
        fuzz::expect_clean([&] {
            const io::GgufFile file(path);
            model::validate_config(model::config_from_gguf(file), path.string());
        });
        return 0;
    }
    const auto dir = fuzz::fresh_dir("model");
    fuzz::write_file(dir / "config.json", bytes);
    fuzz::expect_clean([&] { (void)model::config_from_hf_dir(dir); });
    return 0;
}
