// load_model: recognises the checkpoint format, reads the config, opens the weights and the
// tokenizer beside them, and builds the registered family on the requested device and dtype.
#include <memory>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model {

namespace fs = std::filesystem;

namespace {

Model load_hf(const fs::path& dir, const LoadOptions& opt) {
    const ModelConfig config = config_from_hf_dir(dir);
    const std::unique_ptr<io::WeightStore> store = io::open_safetensors(dir);
    Model m = build_model(config, WeightSource{store.get(), WeightFormat::HuggingFace, dir.string()},
                          opt.runtime);
    m.files = store->files();
    m.format = WeightFormat::HuggingFace;
    const fs::path tok = opt.tokenizer.empty() ? dir / "tokenizer.json" : opt.tokenizer;
    if (opt.load_tokenizer && fs::exists(tok)) m.set_tokenizer(tokenizer::load_hf_tokenizer(tok));
    return m;
}

Model load_gguf(const fs::path& file, const LoadOptions& opt) {
    const auto gguf = std::make_shared<const io::GgufFile>(file);
    const ModelConfig config = config_from_gguf(*gguf);
    const std::unique_ptr<io::WeightStore> store = io::open_gguf_weights(gguf);
    Model m = build_model(config, WeightSource{store.get(), WeightFormat::Gguf, file.string()},
                          opt.runtime);
    m.files = {file};
    m.format = WeightFormat::Gguf;
    if (opt.load_tokenizer) {
        if (!opt.tokenizer.empty())
            m.set_tokenizer(tokenizer::load_llama2c_tokenizer(opt.tokenizer, config.d_vocab));
        else if (gguf->has("tokenizer.ggml.model"))
            m.set_tokenizer(tokenizer::load_gguf_tokenizer(file));
    }
    return m;
}

Model load_llama2c(const fs::path& file, const LoadOptions& opt) {
    io::Llama2cHeader header{};
    const std::unique_ptr<io::WeightStore> store = io::open_llama2c(file, &header);
    const ModelConfig config = config_from_llama2c(header);
    Model m = build_model(config, WeightSource{store.get(), WeightFormat::Llama2c, file.string()},
                          opt.runtime);
    m.files = {file};
    m.format = WeightFormat::Llama2c;
    if (opt.load_tokenizer) {
        // run.c's default is tokenizer.bin; tinyllamas ship tok<vocab>.bin beside the model.
        fs::path tok = opt.tokenizer;
        const fs::path dir = file.parent_path();
        if (tok.empty()) {
            for (const fs::path& cand : {dir / ("tok" + std::to_string(config.d_vocab) + ".bin"),
                                        dir / "tokenizer.bin"})
                if (fs::exists(cand)) {
                    tok = cand;
                    break;
                }
        }
        if (!tok.empty()) m.set_tokenizer(tokenizer::load_llama2c_tokenizer(tok, config.d_vocab));
    }
    return m;
}

}  // namespace

Model load_model(const fs::path& path, const LoadOptions& options) {
    if (!fs::exists(path)) throw IoError(path.string(), "no such file or directory");
    Model m = [&] {
        if (fs::is_directory(path)) {
            if (!fs::exists(path / "config.json"))
                throw InputError(path.string(), "directory without config.json (not a Hugging Face model)");
            return load_hf(path, options);
        }
        if (path.extension() == ".gguf") return load_gguf(path, options);
        if (path.extension() == ".bin") return load_llama2c(path, options);
        if (path.filename() == "config.json") return load_hf(path.parent_path(), options);
        throw UnsupportedError(path.string(),
                               "model format (expected a Hugging Face directory, .gguf or a "
                               "llama2.c .bin checkpoint)");
    }();
    m.path = path;
    return m;
}

}  // namespace sinkscope::model
