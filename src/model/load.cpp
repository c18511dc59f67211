// load_model: io::locate_model classifies the path (HF directory, GGUF, llama2.c) and finds the
// files; this reads the config, opens the weights and tokenizer, and builds the registered family
// on the requested device and dtype.
#include <memory>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/io/model_files.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "sinkscope/tokenizer/sentencepiece.hpp"

namespace sinkscope::model {

namespace fs = std::filesystem;

namespace {

// The tokenizer: options.tokenizer overrides what locate_model found beside the weights.
std::unique_ptr<tokenizer::Tokenizer> open_tokenizer_file(const io::ModelFiles& files,
                                                          const LoadOptions& opt, int64_t d_vocab) {
    const fs::path tok = opt.tokenizer.empty() ? files.tokenizer : opt.tokenizer;
    if (!opt.load_tokenizer || tok.empty()) return nullptr;
    if (tok.extension() == ".json") return tokenizer::load_hf_tokenizer(tok);
    if (tok.extension() == ".gguf") {
        const io::GgufFile g(tok);
        if (!g.has("tokenizer.ggml.model")) return nullptr;  // weights without a vocabulary
        return tokenizer::load_gguf_tokenizer(tok);
    }
    if (tok.extension() == ".bin") return tokenizer::load_llama2c_tokenizer(tok, d_vocab);
    // tokenizer.model / sentencepiece.bpe.model; XLM-R's gets the fairseq id layout.
    if (tok.extension() == ".model") return tokenizer::load_sentencepiece_tokenizer(tok);
    return nullptr;  // an unknown tokenizer format: ids only
}

std::unique_ptr<tokenizer::Tokenizer> open_tokenizer(const io::ModelFiles& files,
                                                     const LoadOptions& opt, int64_t d_vocab) {
    auto t = open_tokenizer_file(files, opt, d_vocab);
    if (t) t->set_origin((opt.tokenizer.empty() ? files.tokenizer : opt.tokenizer).string());
    return t;
}

}  // namespace

ModelConfig read_model_config(const io::ModelFiles& files, WeightFormat* format) {
    WeightFormat f = WeightFormat::HuggingFace;
    ModelConfig config;
    switch (files.format) {
        case io::ModelFormat::HfDirectory:
            config = config_from_hf_dir(files.root);
            break;
        case io::ModelFormat::Gguf:
            config = config_from_gguf(io::GgufFile(files.root));
            f = WeightFormat::Gguf;
            break;
        case io::ModelFormat::Llama2c: {
            io::Llama2cHeader header{};
            io::open_llama2c(files.root, &header);  // header only
            config = config_from_llama2c(header);
            f = WeightFormat::Llama2c;
            break;
        }
    }
    if (format) *format = f;
    return config;
}

Model load_model(const fs::path& path, const LoadOptions& options) {
    const io::ModelFiles files = io::locate_model(path);
    // The config first, so an unknown architecture is reported before weight problems.
    WeightFormat format = WeightFormat::HuggingFace;
    const ModelConfig config = read_model_config(files, &format);
    const std::unique_ptr<io::WeightStore> store = io::open_weights(files);
    Model m = build_model(config, WeightSource{store.get(), format, files.root.string()},
                          options.runtime);
    m.files = store->files();
    m.format = format;
    m.path = path;
    // Vision models have no tokenizer; they read images through their image processor.
    if (!config.is_vision()) m.set_tokenizer(open_tokenizer(files, options, config.d_vocab));
    else if (!files.preprocessor.empty())
        m.set_image_processor(io::ImageProcessor::from_file(files.preprocessor));
    return m;
}

}  // namespace sinkscope::model
