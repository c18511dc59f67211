// Vocabularies stored in GGUF files (tokenizer.ggml.*), loaded into the generic pipeline:
// `llama` = SentencePiece BPE (scores order merges, byte fallback, dummy-prefix space) and
// `gpt2` = byte-level BPE with a merge list and a pre-tokenizer regex named by ggml.pre.
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/tokenizer/hf_pipeline.hpp"
#include "sinkscope/tokenizer/wordpiece.hpp"

namespace sinkscope::tokenizer {

namespace {

// llama.cpp token types (llama_token_type).
enum GgufTokenType : int64_t {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6,
};

const char* const kSpaceMarker = "\xE2\x96\x81";  // '▁'

bool get_bool_or(const io::GgufFile& f, const std::string& key, bool fallback) {
    auto it = f.metadata().find(key);
    if (it == f.metadata().end()) return fallback;
    if (auto b = std::get_if<bool>(&it->second.v)) return *b;
    throw InputError(f.path().string(), "metadata " + key + " is not a bool");
}

// Token ids stored as uint32 use 0xFFFFFFFF (or a negative value) for "none".
int32_t token_id_or_none(const io::GgufFile& f, const std::string& key, int64_t n_vocab) {
    const int64_t id = f.get_int_or(key, -1);
    if (id < 0 || id >= n_vocab) return -1;
    return static_cast<int32_t>(id);
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& gguf_path) {
    const io::GgufFile f(gguf_path);
    const std::string file = gguf_path.string();
    const std::string model = f.get_string("tokenizer.ggml.model");
    if (model != "llama" && model != "gpt2" && model != "bert")
        throw UnsupportedError(
            file, "tokenizer.ggml.model " + quote(model) + " (supported: llama, gpt2, bert)");

    const std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
    const auto n_vocab = static_cast<int64_t>(tokens.size());
    SS_CHECK_INPUT(n_vocab > 0 && n_vocab < (int64_t{1} << 24), file, "tokenizer.ggml.tokens has ",
                   n_vocab, " entries");
    std::vector<int64_t> types(tokens.size(), kNormal);
    if (f.has("tokenizer.ggml.token_type")) {
        types = f.get_int_array("tokenizer.ggml.token_type");
        SS_CHECK_INPUT(types.size() == tokens.size(), file, "tokenizer.ggml.token_type has ",
                       types.size(), " entries for ", tokens.size(), " tokens");
    }

    PipelineConfig cfg;
    cfg.origin = file;
    cfg.bos = token_id_or_none(f, "tokenizer.ggml.bos_token_id", n_vocab);
    cfg.eos = token_id_or_none(f, "tokenizer.ggml.eos_token_id", n_vocab);
    // Control and user-defined tokens are matched whole in the raw text, as HF does with
    // added tokens (llama.cpp's test vectors come from HF AutoTokenizer).
    for (int64_t i = 0; i < n_vocab; ++i) {
        const int64_t t = types[static_cast<size_t>(i)];
        if (t != kControl && t != kUserDefined) continue;
        AddedToken a;
        a.content = tokens[static_cast<size_t>(i)];
        a.id = static_cast<int32_t>(i);
        a.special = t == kControl;
        a.normalized = false;
        cfg.added.push_back(std::move(a));
    }

    if (model == "bert") {
        // llama.cpp's converter stores word-initial pieces as "▁piece" and continuations
        // ("##piece" in BERT's vocab.txt) as "piece"; undo that for WordPiece.
        Vocab vocab;
        const std::string marker = kSpaceMarker;
        for (int64_t i = 0; i < n_vocab; ++i) {
            const std::string& t = tokens[static_cast<size_t>(i)];
            std::string piece;
            if (types[static_cast<size_t>(i)] == kControl ||
                types[static_cast<size_t>(i)] == kUnknown) {
                piece = t;
            } else if (t.compare(0, marker.size(), marker) == 0) {
                piece = t.substr(marker.size());
            } else {
                piece = "##" + t;
            }
            vocab.set(static_cast<int32_t>(i), std::move(piece));
        }
        NormalizerStep bert{NormalizerStep::Kind::Bert, "", ""};
        cfg.normalizer.push_back(bert);
        PreTokenizerStep ws;
        ws.kind = PreTokenizerStep::Kind::Split;
        ws.regex = std::make_shared<Regex>(R"(\s+)");
        ws.behavior = SplitBehavior::Removed;
        PreTokenizerStep punct;
        punct.kind = PreTokenizerStep::Kind::Split;
        punct.regex = std::make_shared<Regex>(kBertPunctuationPattern);
        cfg.pre_tokenizer = {ws, punct};
        cfg.decoder.wordpiece_prefix = "##";
        cfg.decoder.wordpiece_cleanup = true;
        const int32_t cls = token_id_or_none(f, "tokenizer.ggml.cls_token_id", n_vocab);
        const int32_t sep = token_id_or_none(f, "tokenizer.ggml.seperator_token_id", n_vocab);
        if (cls >= 0) cfg.prefix.push_back(cls);
        if (sep >= 0) cfg.suffix.push_back(sep);
        if (cfg.bos < 0) cfg.bos = cls;
        if (cfg.eos < 0) cfg.eos = sep;
        cfg.kind = "wordpiece";
        const int32_t unk = token_id_or_none(f, "tokenizer.ggml.unknown_token_id", n_vocab);
        return make_pipeline_tokenizer(std::move(cfg),
                                       std::make_unique<WordPieceModel>(std::move(vocab), unk));
    }

    Vocab vocab;
    for (int64_t i = 0; i < n_vocab; ++i)
        vocab.set(static_cast<int32_t>(i), tokens[static_cast<size_t>(i)], /*prefer_last=*/true);

    BpeOptions opt;
    if (model == "llama") {
        opt.order = MergeOrder::Scores;
        opt.byte_fallback = true;
        opt.unk_id = token_id_or_none(f, "tokenizer.ggml.unknown_token_id", n_vocab);
        std::vector<double> scores_d = f.get_float_array("tokenizer.ggml.scores");
        SS_CHECK_INPUT(scores_d.size() == tokens.size(), file, "tokenizer.ggml.scores has ",
                       scores_d.size(), " entries for ", tokens.size(), " tokens");
        BpeModel bpe(std::move(vocab), opt);
        bpe.set_scores(std::vector<float>(scores_d.begin(), scores_d.end()));

        const bool space_prefix = get_bool_or(f, "tokenizer.ggml.add_space_prefix", true);
        if (space_prefix)
            cfg.normalizer.push_back({NormalizerStep::Kind::Prepend, kSpaceMarker, ""});
        cfg.normalizer.push_back({NormalizerStep::Kind::Replace, " ", kSpaceMarker});
        cfg.decoder.space_marker = kSpaceMarker;
        cfg.decoder.byte_fallback = true;
        cfg.decoder.strip_leading_spaces = space_prefix ? 1 : 0;
        if (get_bool_or(f, "tokenizer.ggml.add_bos_token", true) && cfg.bos >= 0)
            cfg.prefix.push_back(cfg.bos);
        if (get_bool_or(f, "tokenizer.ggml.add_eos_token", false) && cfg.eos >= 0)
            cfg.suffix.push_back(cfg.eos);
        cfg.kind = "spm-bpe";
        return make_pipeline_tokenizer(std::move(cfg), std::move(bpe));
    }

    // gpt2: byte-level BPE.
    opt.order = MergeOrder::Ranks;
    BpeModel bpe(std::move(vocab), opt);
    const std::vector<std::string> merges = f.get_string_array("tokenizer.ggml.merges");
    for (size_t r = 0; r < merges.size(); ++r) {
        const std::string& m = merges[r];
        const size_t sp = m.find(' ', 1);
        SS_CHECK_INPUT(sp != std::string::npos, file, "tokenizer.ggml.merges[", r, "] ", quote(m),
                       " is not two pieces separated by a space");
        // Merges whose parts are missing from the vocabulary can never apply; skip them.
        bpe.add_merge(std::string_view(m).substr(0, sp), std::string_view(m).substr(sp + 1),
                      static_cast<int32_t>(r));
    }
    const std::string pre =
        f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : std::string("default");
    const char* pattern = nullptr;
    // llama.cpp (llama-vocab.cpp) maps gpt-2, phi-2, roberta-bpe and olmo (the GPT-NeoX-20B
    // tokenizer of Pythia, as convert_hf_to_gguf.py identifies it) to the GPT-2 regex.
    if (pre == "gpt-2" || pre == "default" || pre == "gpt-neox" || pre == "phi-2" ||
        pre == "roberta-bpe" || pre == "olmo") {
        pattern = kGpt2Pattern;
    } else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3") {
        pattern = kLlama3Pattern;
    } else if (pre == "qwen2") {
        pattern = kQwen2Pattern;
    } else {
        throw UnsupportedError(file, "tokenizer.ggml.pre " + quote(pre));
    }
    PreTokenizerStep split;
    split.kind = PreTokenizerStep::Kind::Split;
    split.regex = std::make_shared<Regex>(pattern);
    split.behavior = SplitBehavior::Isolated;
    PreTokenizerStep byte_level;
    byte_level.kind = PreTokenizerStep::Kind::ByteLevel;
    cfg.pre_tokenizer = {split, byte_level};
    cfg.decoder.byte_level = true;
    if (get_bool_or(f, "tokenizer.ggml.add_bos_token", false) && cfg.bos >= 0)
        cfg.prefix.push_back(cfg.bos);
    if (get_bool_or(f, "tokenizer.ggml.add_eos_token", false) && cfg.eos >= 0)
        cfg.suffix.push_back(cfg.eos);
    cfg.kind = "bpe-byte-level";
    return make_pipeline_tokenizer(std::move(cfg), std::move(bpe));
}

}  // namespace sinkscope::tokenizer
