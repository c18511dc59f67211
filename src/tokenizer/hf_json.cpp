// Hugging Face tokenizer.json (BPE: byte-level and SentencePiece-style with byte fallback;
// WordPiece; Unigram) loaded into the generic pipeline; tokenizer_config.json beside it can
// switch BOS/EOS.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/tokenizer/hf_pipeline.hpp"
#include "sinkscope/tokenizer/unigram.hpp"
#include "sinkscope/tokenizer/wordpiece.hpp"

namespace sinkscope::tokenizer {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// RFC 4648 base64 (HF stores the Precompiled charsmap this way); nullopt when malformed.
std::optional<std::string> decode_base64(std::string_view in) {
    auto sextet = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+' || c == '-') return 62;
        if (c == '/' || c == '_') return 63;
        return -1;
    };
    while (!in.empty() && in.back() == '=') in.remove_suffix(1);
    if (in.size() % 4 == 1) return std::nullopt;
    std::string out;
    out.reserve(in.size() * 3 / 4);
    uint32_t acc = 0;
    int n_bits = 0;
    for (char c : in) {
        const int v = sextet(c);
        if (v < 0) return std::nullopt;
        acc = (acc << 6) | static_cast<uint32_t>(v);
        n_bits += 6;
        if (n_bits >= 8) {
            n_bits -= 8;
            out.push_back(static_cast<char>((acc >> n_bits) & 0xFF));
        }
    }
    return out;
}

struct Loader {
    std::string file;

    [[noreturn]] void fail(const std::string& problem) const { throw InputError(file, problem); }
    [[noreturn]] void unsupported(const std::string& what) const {
        throw UnsupportedError(file, what);
    }

    const json& need(const json& obj, const char* key, const std::string& where) const {
        if (!obj.is_object() || !obj.contains(key)) fail(where + ": missing \"" + key + "\"");
        return obj.at(key);
    }
    std::string str(const json& obj, const char* key, const std::string& where) const {
        const json& v = need(obj, key, where);
        if (!v.is_string()) fail(where + ": \"" + key + "\" is not a string");
        return v.get<std::string>();
    }
    static bool flag(const json& obj, const char* key, bool fallback) {
        if (!obj.is_object() || !obj.contains(key) || !obj.at(key).is_boolean()) return fallback;
        return obj.at(key).get<bool>();
    }

    // HF patterns are {"String": s} (literal) or {"Regex": r}.
    std::string pattern_regex(const json& pattern, const std::string& where) const {
        if (pattern.is_object() && pattern.contains("Regex"))
            return str(pattern, "Regex", where + " pattern");
        if (pattern.is_object() && pattern.contains("String")) {
            // A literal: every ASCII punctuation byte escaped, which PCRE2 reads as that byte
            // (\Q...\E would end early at a "\E" inside the string).
            std::string out;
            for (char c : str(pattern, "String", where + " pattern")) {
                const auto u = static_cast<unsigned char>(c);
                if (u < 0x80 && !std::isalnum(u)) out += '\\';
                out += c;
            }
            return out;
        }
        fail(where + ": pattern is neither String nor Regex");
    }
    std::string pattern_string(const json& pattern, const std::string& where) const {
        if (pattern.is_object() && pattern.contains("String"))
            return str(pattern, "String", where + " pattern");
        unsupported(where + " with a Regex pattern");
    }
    std::shared_ptr<Regex> regex(const std::string& pattern) const {
        return std::make_shared<Regex>(pattern, file);
    }
    // A Sequence inside a Sequence inside ...: bounded, so nesting cannot exhaust the stack.
    void nest(int depth, const std::string& where) const {
        if (uint64_t(depth) > limit_value(Limit::TokenizerNesting))
            throw_limit(file, Limit::TokenizerNesting, where + " Sequence nesting depth",
                        uint64_t(depth));
    }
    const json& list(const json& obj, const char* key, const std::string& where) const {
        const json& v = need(obj, key, where);
        if (!v.is_array()) fail(where + ": \"" + key + "\" is not a list");
        return v;
    }

    void normalizer(const json& n, std::vector<NormalizerStep>& out, int depth = 0) const {
        if (n.is_null()) return;
        const std::string type = str(n, "type", "normalizer");
        if (type == "Sequence") {
            nest(depth + 1, "normalizer");
            for (const json& s : list(n, "normalizers", "normalizer Sequence"))
                normalizer(s, out, depth + 1);
        } else if (type == "Prepend") {
            out.push_back({NormalizerStep::Kind::Prepend, str(n, "prepend", "Prepend"), ""});
        } else if (type == "Replace") {
            const json& pattern = need(n, "pattern", "Replace");
            NormalizerStep r{NormalizerStep::Kind::Replace, "", str(n, "content", "Replace")};
            if (pattern.contains("Regex")) {
                r.regex = regex(pattern_regex(pattern, "normalizer Replace"));
            } else {
                r.a = pattern_string(pattern, "normalizer Replace");
            }
            out.push_back(std::move(r));
        } else if (type == "Precompiled") {
            // SentencePiece normalization rules (e.g. nmt_nfkc), base64; null or "" = none.
            const json& blob = n.value("precompiled_charsmap", json());
            if (blob.is_null()) return;
            if (!blob.is_string()) fail("Precompiled: precompiled_charsmap is not a string");
            const auto bytes = decode_base64(blob.get<std::string>());
            if (!bytes) fail("Precompiled: precompiled_charsmap is not valid base64");
            NormalizerStep p{NormalizerStep::Kind::Precompiled, "", ""};
            p.charsmap = std::make_shared<const PrecompiledCharsMap>(*bytes, file);
            out.push_back(std::move(p));
        } else if (type == "NFC") {
            out.push_back({NormalizerStep::Kind::Nfc, "", ""});
        } else if (type == "Lowercase") {
            out.push_back({NormalizerStep::Kind::Lowercase, "", ""});
        } else if (type == "BertNormalizer") {
            NormalizerStep b{NormalizerStep::Kind::Bert, "", ""};
            b.clean_text = flag(n, "clean_text", true);
            b.handle_chinese_chars = flag(n, "handle_chinese_chars", true);
            b.lowercase = flag(n, "lowercase", true);
            b.strip_accents = flag(n, "strip_accents", b.lowercase);  // null: follows lowercase
            out.push_back(b);
        } else if (type == "Strip") {
            std::string sides;
            if (flag(n, "strip_left", true)) sides += 'l';
            if (flag(n, "strip_right", true)) sides += 'r';
            out.push_back({NormalizerStep::Kind::Strip, sides, ""});
        } else {
            unsupported("normalizer " + quote(type));
        }
    }

    void pre_tokenizer(const json& p, std::vector<PreTokenizerStep>& out, int depth = 0) const {
        if (p.is_null()) return;
        const std::string type = str(p, "type", "pre_tokenizer");
        if (type == "Sequence") {
            nest(depth + 1, "pre_tokenizer");
            for (const json& s : list(p, "pretokenizers", "pre_tokenizer Sequence"))
                pre_tokenizer(s, out, depth + 1);
        } else if (type == "Split") {
            PreTokenizerStep s;
            s.kind = PreTokenizerStep::Kind::Split;
            s.regex = regex(pattern_regex(need(p, "pattern", "Split"), "Split"));
            try {
                s.behavior = parse_split_behavior(str(p, "behavior", "Split"));
            } catch (const UnsupportedError&) {  // that message cannot name the file
                unsupported("Split behavior " + quote(str(p, "behavior", "Split")));
            }
            s.invert = flag(p, "invert", false);
            out.push_back(std::move(s));
        } else if (type == "ByteLevel") {
            PreTokenizerStep s;
            s.kind = PreTokenizerStep::Kind::ByteLevel;
            s.add_prefix_space = flag(p, "add_prefix_space", true);
            if (flag(p, "use_regex", true)) s.regex = std::make_shared<Regex>(kGpt2Pattern);
            out.push_back(std::move(s));
        } else if (type == "Metaspace") {
            PreTokenizerStep s;
            s.kind = PreTokenizerStep::Kind::Metaspace;
            s.replacement = str(p, "replacement", "Metaspace");
            s.split = flag(p, "split", true);
            std::string scheme = "always";
            if (p.contains("prepend_scheme") && p.at("prepend_scheme").is_string()) {
                scheme = p.at("prepend_scheme").get<std::string>();
            } else if (!flag(p, "add_prefix_space", true)) {
                scheme = "never";
            }
            if (scheme == "always") {
                s.prepend = PreTokenizerStep::Prepend::Always;
            } else if (scheme == "first") {
                s.prepend = PreTokenizerStep::Prepend::First;
            } else if (scheme == "never") {
                s.prepend = PreTokenizerStep::Prepend::Never;
            } else {
                unsupported("Metaspace prepend_scheme " + quote(scheme));
            }
            out.push_back(std::move(s));
        } else if (type == "Digits") {
            PreTokenizerStep s;
            s.kind = PreTokenizerStep::Kind::Split;
            s.regex = std::make_shared<Regex>(flag(p, "individual_digits", false) ? R"(\p{N})"
                                                                                  : R"(\p{N}+)");
            out.push_back(std::move(s));
        } else if (type == "BertPreTokenizer") {
            PreTokenizerStep ws;
            ws.kind = PreTokenizerStep::Kind::Split;
            ws.regex = std::make_shared<Regex>(R"(\s+)");
            ws.behavior = SplitBehavior::Removed;
            out.push_back(std::move(ws));
            PreTokenizerStep punct;
            punct.kind = PreTokenizerStep::Kind::Split;
            punct.regex = std::make_shared<Regex>(kBertPunctuationPattern);
            punct.behavior = SplitBehavior::Isolated;
            out.push_back(std::move(punct));
        } else if (type == "WhitespaceSplit") {
            PreTokenizerStep s;
            s.kind = PreTokenizerStep::Kind::Split;
            s.regex = std::make_shared<Regex>(R"(\s+)");
            s.behavior = SplitBehavior::Removed;
            out.push_back(std::move(s));
        } else if (type == "Whitespace") {
            PreTokenizerStep s;
            s.kind = PreTokenizerStep::Kind::Split;
            s.regex = std::make_shared<Regex>(R"(\w+|[^\w\s]+)");
            s.invert = true;
            s.behavior = SplitBehavior::Removed;
            out.push_back(std::move(s));
        } else {
            unsupported("pre_tokenizer " + quote(type));
        }
    }

    // A token id from the file: a non-negative integer below the vocabulary limit.
    int32_t id_value(const json& v, const std::string& where) const {
        if (!v.is_number_integer() || v.get<int64_t>() < 0)
            fail(where + ": id " + io::brief(v) + " is not a non-negative integer");
        check_limit(file, Limit::VocabSize, where + ": token id", v.get<uint64_t>());
        if (v.get<uint64_t>() > uint64_t(INT32_MAX))  // ids are int32 (a raised limit)
            fail(where + ": id " + io::brief(v) + " does not fit a 32-bit token id");
        return v.get<int32_t>();
    }

    void added_tokens(const json& root, PipelineConfig& cfg) const {
        const json& added = root.contains("added_tokens") && !root.at("added_tokens").is_null()
                                ? list(root, "added_tokens", "tokenizer.json")
                                : json::array();
        for (const json& t : added) {
            AddedToken a;
            a.content = str(t, "content", "added_tokens");
            a.id = id_value(need(t, "id", "added_tokens"), "added token " + quote(a.content));
            a.special = flag(t, "special", false);
            a.normalized = flag(t, "normalized", !a.special);
            a.lstrip = flag(t, "lstrip", false);
            a.rstrip = flag(t, "rstrip", false);
            a.single_word = flag(t, "single_word", false);
            cfg.added.push_back(std::move(a));
        }
    }

    void decoder(const json& d, DecoderConfig& out, int depth = 0) const {
        if (d.is_null()) return;
        const std::string type = str(d, "type", "decoder");
        if (type == "Sequence") {
            nest(depth + 1, "decoder");
            for (const json& s : list(d, "decoders", "decoder Sequence"))
                decoder(s, out, depth + 1);
        } else if (type == "ByteLevel") {
            out.byte_level = true;
        } else if (type == "Replace") {
            const std::string from =
                pattern_string(need(d, "pattern", "Replace"), "decoder Replace");
            if (str(d, "content", "decoder Replace") != " ")
                unsupported("decoder Replace to anything but a space");
            out.space_marker = from;
        } else if (type == "ByteFallback") {
            out.byte_fallback = true;
        } else if (type == "WordPiece") {
            out.wordpiece_prefix = d.value("prefix", std::string("##"));
            out.wordpiece_cleanup = flag(d, "cleanup", true);
        } else if (type == "Fuse") {
        } else if (type == "Strip") {
            if (str(d, "content", "decoder Strip") != " ")
                unsupported("decoder Strip of non-space");
            out.strip_leading_spaces = d.value("start", 0);
        } else if (type == "Metaspace") {
            out.space_marker = str(d, "replacement", "decoder Metaspace");
            std::string scheme = d.value("prepend_scheme", std::string("always"));
            if (!d.contains("prepend_scheme") && !flag(d, "add_prefix_space", true))
                scheme = "never";
            if (scheme != "never") out.strip_leading_spaces = 1;
        } else {
            unsupported("decoder " + quote(type));
        }
    }

    int32_t token_id(const Vocab& model_vocab, const std::vector<AddedToken>& added,
                     const std::string& content) const {
        for (const AddedToken& t : added)
            if (t.content == content) return t.id;
        if (const int32_t id = model_vocab.find(content); id >= 0) return id;
        fail("special token " + quote(content) + " is not in the vocabulary");
    }

    // Post-processor -> template around a single sequence.
    // special_tokens[name].ids of a TemplateProcessing, each a valid id.
    std::vector<int32_t> special_ids(const json& specials, const std::string& name,
                                     const Vocab& vocab,
                                     const std::vector<AddedToken>& added) const {
        if (!specials.is_object() || !specials.contains(name) || !specials.at(name).is_object() ||
            !specials.at(name).contains("ids"))
            return {token_id(vocab, added, name)};
        std::vector<int32_t> ids;
        for (const json& v : list(specials.at(name), "ids", "special token " + quote(name)))
            ids.push_back(id_value(v, "special token " + quote(name)));
        return ids;
    }

    void post_processor(const json& p, const Vocab& vocab, const std::vector<AddedToken>& added,
                        PipelineConfig& cfg, int depth = 0) const {
        if (p.is_null()) return;
        const std::string type = str(p, "type", "post_processor");
        if (type == "Sequence") {
            nest(depth + 1, "post_processor");
            for (const json& s : list(p, "processors", "post_processor Sequence"))
                post_processor(s, vocab, added, cfg, depth + 1);
        } else if (type == "TemplateProcessing") {
            bool seen_sequence = false;
            for (const json& item : need(p, "single", "TemplateProcessing")) {
                if (item.contains("Sequence")) {
                    seen_sequence = true;
                    continue;
                }
                if (!item.contains("SpecialToken")) fail("TemplateProcessing: unknown item");
                const std::string name = str(item.at("SpecialToken"), "id", "SpecialToken");
                const std::vector<int32_t> ids =
                    special_ids(p.value("special_tokens", json::object()), name, vocab, added);
                auto& dst = seen_sequence ? cfg.suffix : cfg.prefix;
                dst.insert(dst.end(), ids.begin(), ids.end());
            }
            cfg.pair.clear();
            for (const json& item : p.value("pair", json::array())) {
                TemplatePiece t;
                if (item.contains("Sequence")) {
                    const std::string which = str(item.at("Sequence"), "id", "Sequence");
                    t.sequence = which == "A" ? 1 : 2;
                    t.type_id = item.at("Sequence").value("type_id", 0);
                } else if (item.contains("SpecialToken")) {
                    const std::string name = str(item.at("SpecialToken"), "id", "SpecialToken");
                    t.ids =
                        special_ids(p.value("special_tokens", json::object()), name, vocab, added);
                    t.type_id = item.at("SpecialToken").value("type_id", 0);
                } else {
                    fail("TemplateProcessing: unknown pair item");
                }
                cfg.pair.push_back(std::move(t));
            }
        } else if (type == "RobertaProcessing" || type == "BertProcessing") {
            const json& cls = need(p, "cls", type);
            const json& sep = need(p, "sep", type);
            if (!cls.is_array() || cls.size() != 2 || !sep.is_array() || sep.size() != 2)
                fail(type + ": cls and sep must be [token, id]");
            const int32_t cls_id = id_value(cls.at(1), type + " cls");
            const int32_t sep_id = id_value(sep.at(1), type + " sep");
            cfg.prefix.push_back(cls_id);
            cfg.suffix.push_back(sep_id);
            // Roberta: <s> A </s></s> B </s>, all type 0; Bert: [CLS] A [SEP] B [SEP], B type 1.
            const bool roberta = type == "RobertaProcessing";
            const int32_t b_type = roberta ? 0 : 1;
            cfg.pair = {{0, {cls_id}, 0}, {1, {}, 0}, {0, {sep_id}, 0}};
            if (roberta) cfg.pair.push_back({0, {sep_id}, 0});
            cfg.pair.push_back({2, {}, b_type});
            cfg.pair.push_back({0, {sep_id}, b_type});
        } else if (type == "ByteLevel") {
            // offsets only
        } else {
            unsupported("post_processor " + quote(type));
        }
    }
};

std::string token_name(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v.at("content").is_string())
        return v.at("content").get<std::string>();
    return {};
}

// tokenizer_config.json beside tokenizer.json: BOS/EOS names, and add_bos_token /
// add_eos_token for the tokenizer classes whose fast versions rebuild the post-processor.
void apply_tokenizer_config(const fs::path& tokenizer_json, const Vocab& vocab,
                            PipelineConfig& cfg) {
    const fs::path config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
    json config = json::object();
    if (fs::exists(config_path)) config = io::read_json_file(config_path);
    if (!config.is_object()) throw InputError(config_path.string(), "not a JSON object");
    auto lookup = [&](const std::string& name) -> int32_t {
        if (name.empty()) return -1;
        for (const AddedToken& t : cfg.added)
            if (t.content == name) return t.id;
        return vocab.find(name);
    };
    cfg.bos = lookup(token_name(config.value("bos_token", json())));
    cfg.eos = lookup(token_name(config.value("eos_token", json())));
    if (cfg.bos < 0 && !cfg.prefix.empty()) cfg.bos = cfg.prefix.front();
    if (cfg.eos < 0 && !cfg.suffix.empty()) cfg.eos = cfg.suffix.back();
    const std::string cls =
        io::json_string_or(config, "tokenizer_class", std::string(), config_path.string());
    const bool rebuilds = cls.rfind("Llama", 0) == 0 || cls.rfind("CodeLlama", 0) == 0 ||
                          cls.rfind("Gemma", 0) == 0 || cls.rfind("GPTNeoX", 0) == 0;
    if (rebuilds && config.contains("add_bos_token") && config.at("add_bos_token").is_boolean()) {
        cfg.prefix.clear();
        if (config.at("add_bos_token").get<bool>() && cfg.bos >= 0) cfg.prefix.push_back(cfg.bos);
    }
    if (rebuilds && config.contains("add_eos_token") && config.at("add_eos_token").is_boolean()) {
        cfg.suffix.clear();
        if (config.at("add_eos_token").get<bool>() && cfg.eos >= 0) cfg.suffix.push_back(cfg.eos);
    }
}

// "model": {"type": "Unigram", "vocab": [[piece, score], ...], "unk_id", "byte_fallback"}
// (XLM-R, T5, ...): the vocabulary is a list, ids are positions.
std::unique_ptr<Tokenizer> load_unigram(const Loader& L, const json& root,
                                        const fs::path& tokenizer_json) {
    const json& model = L.need(root, "model", "tokenizer.json");
    const json& vocab_json = L.need(model, "vocab", "model");
    if (!vocab_json.is_array()) L.fail("Unigram model.vocab is not a list of [piece, score]");
    check_limit(L.file, Limit::VocabSize, "Unigram model.vocab entries", vocab_json.size());
    std::vector<std::pair<std::string, double>> pieces;
    pieces.reserve(vocab_json.size());
    for (const json& entry : vocab_json) {
        if (!entry.is_array() || entry.size() != 2 || !entry.at(0).is_string() ||
            !entry.at(1).is_number())
            L.fail("Unigram model.vocab entry " + std::to_string(pieces.size()) +
                   " is not [piece, score]");
        pieces.emplace_back(entry.at(0).get<std::string>(), entry.at(1).get<double>());
    }
    int32_t unk_id = -1;
    if (model.contains("unk_id") && !model.at("unk_id").is_null()) {
        const json& u = model.at("unk_id");
        if (!u.is_number_integer() || u.get<int64_t>() < 0 ||
            u.get<int64_t>() >= static_cast<int64_t>(pieces.size()))
            L.fail("Unigram unk_id " + io::brief(u) + " is not an id of its vocabulary of " +
                   std::to_string(pieces.size()));
        unk_id = u.get<int32_t>();
    }
    auto unigram =
        std::make_unique<UnigramModel>(pieces, unk_id, Loader::flag(model, "byte_fallback", false));

    PipelineConfig cfg;
    cfg.origin = L.file;
    L.added_tokens(root, cfg);
    L.normalizer(root.value("normalizer", json()), cfg.normalizer);
    L.pre_tokenizer(root.value("pre_tokenizer", json()), cfg.pre_tokenizer);
    L.decoder(root.value("decoder", json()), cfg.decoder);
    L.post_processor(root.value("post_processor", json()), unigram->vocab(), cfg.added, cfg);
    cfg.kind = "unigram";
    apply_tokenizer_config(tokenizer_json, unigram->vocab(), cfg);
    return make_pipeline_tokenizer(std::move(cfg), std::move(unigram));
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const fs::path& tokenizer_json) {
    Loader L{tokenizer_json.string()};
    const json root = io::read_json_file(tokenizer_json);
    try {
        const json& model = L.need(root, "model", "tokenizer.json");
        const std::string type = io::json_string_or(model, "type", "BPE", L.file);
        if (type != "BPE" && type != "WordPiece" && type != "Unigram")
            L.unsupported("tokenizer model type " + quote(type));
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
            if (type == "BPE" && model.contains(key) && model.at(key).is_string() &&
                !model.at(key).get<std::string>().empty())
                L.unsupported(std::string("BPE with ") + key);
        if (model.contains("dropout") && model.at("dropout").is_number() &&
            model.at("dropout").get<double>() > 0)
            L.unsupported("BPE dropout");

        if (type == "Unigram") return load_unigram(L, root, tokenizer_json);

        const json& vocab_json = L.need(model, "vocab", "model");
        if (!vocab_json.is_object()) L.fail("model.vocab is not an object");
        Vocab vocab;
        // Ids index a table: bounded by the vocabulary limit (and so by what a table may cost).
        for (const auto& [piece, id] : vocab_json.items())
            vocab.set(L.id_value(id, "model.vocab piece " + quote(piece)), piece);

        PipelineConfig cfg;
        cfg.origin = L.file;
        L.added_tokens(root, cfg);

        if (type == "WordPiece") {
            const std::string unk = model.value("unk_token", std::string("[UNK]"));
            const int32_t unk_id = vocab.find(unk);
            const std::string prefix = model.value("continuing_subword_prefix", std::string("##"));
            const auto max_chars = model.value("max_input_chars_per_word", size_t{100});
            L.normalizer(root.value("normalizer", json()), cfg.normalizer);
            L.pre_tokenizer(root.value("pre_tokenizer", json()), cfg.pre_tokenizer);
            L.decoder(root.value("decoder", json()), cfg.decoder);
            L.post_processor(root.value("post_processor", json()), vocab, cfg.added, cfg);
            if (cfg.decoder.wordpiece_prefix.empty()) cfg.decoder.wordpiece_prefix = prefix;
            if (!cfg.prefix.empty()) cfg.bos = cfg.prefix.front();
            if (!cfg.suffix.empty()) cfg.eos = cfg.suffix.back();
            cfg.kind = "wordpiece";
            return make_pipeline_tokenizer(
                std::move(cfg),
                std::make_unique<WordPieceModel>(std::move(vocab), unk_id, prefix, max_chars));
        }
        BpeOptions opt;
        opt.order = MergeOrder::Ranks;
        opt.byte_fallback = Loader::flag(model, "byte_fallback", false);
        opt.fuse_unk = Loader::flag(model, "fuse_unk", false);
        opt.ignore_merges = Loader::flag(model, "ignore_merges", false);
        if (model.contains("unk_token") && model.at("unk_token").is_string())
            opt.unk_id = vocab.find(model.at("unk_token").get<std::string>());
        BpeModel bpe(std::move(vocab), opt);
        int32_t rank = 0;
        for (const json& m : L.list(model, "merges", "model")) {
            std::string left, right;
            if (m.is_string()) {
                const std::string s = m.get<std::string>();
                const size_t sp = s.find(' ');
                if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                    L.fail("merge " + quote(s) + " is not two pieces separated by one space");
                left = s.substr(0, sp);
                right = s.substr(sp + 1);
            } else if (m.is_array() && m.size() == 2 && m.at(0).is_string() &&
                       m.at(1).is_string()) {
                left = m.at(0).get<std::string>();
                right = m.at(1).get<std::string>();
            } else {
                L.fail("merge entry is neither \"a b\" nor [a, b]");
            }
            if (!bpe.add_merge(left, right, rank))
                L.fail("merge " + quote(left + " " + right) +
                       " uses a piece that is not in the vocabulary");
            ++rank;
        }

        L.normalizer(root.value("normalizer", json()), cfg.normalizer);
        L.pre_tokenizer(root.value("pre_tokenizer", json()), cfg.pre_tokenizer);
        L.decoder(root.value("decoder", json()), cfg.decoder);
        L.post_processor(root.value("post_processor", json()), bpe.vocab(), cfg.added, cfg);
        const bool byte_level = cfg.decoder.byte_level;
        cfg.kind = byte_level ? "bpe-byte-level" : (opt.byte_fallback ? "spm-bpe" : "bpe");

        apply_tokenizer_config(tokenizer_json, bpe.vocab(), cfg);
        return make_pipeline_tokenizer(std::move(cfg), std::move(bpe));
    } catch (const json::exception& e) {
        L.fail("unexpected structure: " + printable(e.what()));
    }
}

}  // namespace sinkscope::tokenizer
