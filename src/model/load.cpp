// load_model: io::locate_model classifies the path (HF directory, GGUF, llama2.c) and finds the
// files; this reads the config, opens the weights and tokenizer, and builds the registered family
// on the requested device and dtype.
#include <map>
#include <memory>
#include <optional>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/system.hpp"
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

namespace {

// A metadata-only build at `rt`: every tensor checked, what a real build at rt's dtype takes
// tallied (file_bytes and n_files are the caller's).
WeightFootprint footprint_of(const ModelConfig& config, const WeightSource& src, RuntimeOptions rt,
                             std::optional<Model>* meta_model = nullptr) {
    WeightFootprint f;
    f.value_bytes = compute_dtype_bytes(rt.dtype);
    rt.meta = true;
    WeightSource meta_src = src;
    meta_src.metadata_only = &f;
    Model m = build_model(config, meta_src, rt);
    f.n_params = m.n_params();
    if (meta_model) meta_model->emplace(std::move(m));
    return f;
}

// The one-line refusal of a load whose footprint `f` exceeds the memory budget (CPU runs only:
// a CUDA load holds one tensor at a time on the host). `bf16_need`: the footprint at bfloat16.
void check_memory(const fs::path& path, const WeightFootprint& f, const RuntimeOptions& rt,
                  int64_t bf16_need) {
    if (rt.device != DeviceKind::Cpu) return;
    std::string source;
    const int64_t budget = memory_budget_bytes(&source);
    const int64_t need = f.load_bytes();
    if (budget <= 0 || need <= budget) return;
    std::string way_out;
    const bool narrow = rt.dtype == ComputeDType::BFloat16 || rt.dtype == ComputeDType::Float16;
    if (const int64_t half = narrow ? 0 : bf16_need; half > 0 && half <= budget)
        way_out = "; with --dtype bfloat16 it needs about " + format_bytes(double(half));
    else
        way_out =
            "; a smaller model, a quantized GGUF file of it (Q8_0, Q4_K) or a machine with "
            "more memory is needed";
    throw UnsupportedError(
        path.string(), "loading this model at --dtype " +
                           std::string(compute_dtype_name(rt.dtype)) + " needs about " +
                           format_bytes(double(need)) + " of memory (" +
                           std::to_string(f.n_params) + " parameters), more than the " +
                           format_bytes(double(budget)) + " available (" + source + ")" + way_out);
}

}  // namespace

Model load_model(const fs::path& path, const LoadOptions& options) {
    const io::ModelFiles files = io::locate_model(path);
    // The config first, so an unknown architecture is reported before weight problems.
    WeightFormat format = WeightFormat::HuggingFace;
    const ModelConfig config = read_model_config(files, &format);
    const std::unique_ptr<io::WeightStore> store = io::open_weights(files);
    // A metadata-only build first: every tensor checked, what the load takes tallied, no data
    // read; a model that does not fit is refused before its weights are touched.
    int64_t file_bytes = 0, n_files = 0;
    for (const fs::path& f : store->files()) {
        std::error_code ec;
        const auto size = fs::file_size(f, ec);
        if (!ec) file_bytes += static_cast<int64_t>(size);
        ++n_files;
    }
    const WeightSource src{store.get(), format, files.root.string()};
    std::optional<Model> built;  // the metadata-only model, then the real one
    WeightFootprint footprint = footprint_of(config, src, options.runtime, &built);
    footprint.file_bytes = file_bytes;
    footprint.n_files = n_files;
    std::map<ComputeDType, int64_t> load_memory;
    // The dtypes a CPU runs (float16 needs CUDA).
    for (ComputeDType d : {ComputeDType::Float32, ComputeDType::BFloat16, ComputeDType::Float64}) {
        RuntimeOptions rt = options.runtime;
        rt.device = DeviceKind::Cpu;
        rt.dtype = d;
        load_memory[d] = footprint_of(config, src, rt).load_bytes();
    }
    if (!options.metadata_only) {
        if (options.check_memory)
            check_memory(path, footprint, options.runtime, load_memory[ComputeDType::BFloat16]);
        built.emplace(build_model(config, src, options.runtime));
    }
    Model m = std::move(*built);
    m.footprint = footprint;
    m.load_memory = std::move(load_memory);
    m.files = store->files();
    m.format = format;
    m.path = path;
    // Vision models have no tokenizer; they read images through their image processor.
    if (!config.is_vision())
        m.set_tokenizer(open_tokenizer(files, options, config.d_vocab));
    else if (!files.preprocessor.empty())
        m.set_image_processor(io::ImageProcessor::from_file(files.preprocessor));
    return m;
}

}  // namespace sinkscope::model
