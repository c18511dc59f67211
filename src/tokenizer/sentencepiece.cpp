// SentencePiece .model tokenizers read natively (protobuf wire format) into the pipeline:
// sentencepiece's normalizer (precompiled rules + whitespace options), then Unigram Viterbi with
// its f32 arithmetic or score-ordered BPE over the whole text; optional fairseq id map (XLM-R).
// libsentencepiece is not linked: its bundled protobuf clashes with libtorch's at load time;
// the tests use it as the reference.
#include "sinkscope/tokenizer/sentencepiece.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/tokenizer/hf_pipeline.hpp"
#include "sinkscope/tokenizer/unigram.hpp"

namespace sinkscope::tokenizer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kSpaceMarker = "\xE2\x96\x81";  // '▁'

// ---- protobuf wire format (https://protobuf.dev/programming-guides/encoding/) -------------
class WireReader {
public:
    WireReader(std::string_view data, const std::string& origin) : data_(data), origin_(origin) {}
    bool done() const { return pos_ >= data_.size(); }

    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            SS_CHECK_INPUT(pos_ < data_.size(), origin_, "truncated protobuf varint at byte ",
                           pos_);
            const auto b = static_cast<uint8_t>(data_[pos_++]);
            v |= uint64_t{b & 0x7Fu} << shift;
            if (!(b & 0x80)) return v;
        }
        throw InputError(origin_, "protobuf varint longer than 10 bytes");
    }
    // Next field: (number, wire type); its payload is read by one of the functions below.
    std::pair<uint32_t, uint32_t> key() {
        const uint64_t k = varint();
        return {static_cast<uint32_t>(k >> 3), static_cast<uint32_t>(k & 7)};
    }
    std::string_view bytes() {
        const uint64_t n = varint();
        SS_CHECK_INPUT(n <= data_.size() - pos_, origin_, "protobuf field of ", n,
                       " bytes runs past the end (", data_.size() - pos_, " left)");
        const std::string_view out = data_.substr(pos_, n);
        pos_ += n;
        return out;
    }
    std::string_view fixed32() {
        SS_CHECK_INPUT(4 <= data_.size() - pos_, origin_, "truncated protobuf fixed32");
        pos_ += 4;
        return data_.substr(pos_ - 4, 4);
    }
    void skip(uint32_t wire_type) {
        switch (wire_type) {
            case 0:
                varint();
                return;
            case 1:
                advance(8);
                return;
            case 2:
                bytes();
                return;
            case 5:
                advance(4);
                return;
            default:
                throw InputError(origin_, detail::concat("unsupported protobuf wire type ",
                                                         wire_type, " at byte ", pos_));
        }
    }

private:
    void advance(size_t n) {
        SS_CHECK_INPUT(n <= data_.size() - pos_, origin_, "truncated protobuf field");
        pos_ += n;
    }
    std::string_view data_;
    const std::string& origin_;
    size_t pos_ = 0;
};

json read_json_beside(const fs::path& model_file, const char* name) {
    const fs::path p = model_file.parent_path() / name;
    if (!fs::is_regular_file(p)) return json::object();
    json j = io::read_json_file(p);
    return j.is_object() ? j : json::object();
}

bool flag_or(const json& obj, const char* key, bool fallback) {
    return obj.contains(key) && obj.at(key).is_boolean() ? obj.at(key).get<bool>() : fallback;
}

// ModelProto.SentencePiece.Type
enum SpmType : uint64_t {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6
};

struct SpmPiece {
    std::string text;
    float score = 0;
    uint64_t type = kNormal;
};

struct SpmModel {
    SpmModelInfo info;
    std::vector<SpmPiece> pieces;
    std::string bos_piece = "<s>", eos_piece = "</s>";
};

float read_f32_le(std::string_view b) {
    const uint32_t u = uint32_t(uint8_t(b[0])) | (uint32_t(uint8_t(b[1])) << 8) |
                       (uint32_t(uint8_t(b[2])) << 16) | (uint32_t(uint8_t(b[3])) << 24);
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// The pieces and the TrainerSpec piece names (sentencepiece_model.proto: ModelProto 1 pieces
// {1 piece, 2 score, 3 type}; TrainerSpec 46 bos_piece, 47 eos_piece).
SpmModel read_spm_model(std::string_view serialized, const std::string& origin) {
    SpmModel m;
    m.info = read_spm_model_info(serialized, origin);
    m.pieces.reserve(static_cast<size_t>(m.info.n_pieces));
    WireReader model(serialized, origin);
    while (!model.done()) {
        const auto [field, wire] = model.key();
        if (field == 1 && wire == 2) {
            WireReader piece(model.bytes(), origin);
            SpmPiece p;
            while (!piece.done()) {
                const auto [f, w] = piece.key();
                if (f == 1 && w == 2) {
                    p.text = std::string(piece.bytes());
                } else if (f == 2 && w == 5) {
                    p.score = read_f32_le(piece.fixed32());
                } else if (f == 3 && w == 0) {
                    p.type = piece.varint();
                } else {
                    piece.skip(w);
                }
            }
            SS_CHECK_INPUT(p.type >= kNormal && p.type <= kByte, origin, "piece ", m.pieces.size(),
                           " has unknown type ", p.type);
            m.pieces.push_back(std::move(p));
        } else if (field == 2 && wire == 2) {
            WireReader trainer(model.bytes(), origin);
            while (!trainer.done()) {
                const auto [f, w] = trainer.key();
                if ((f == 46 || f == 47) && w == 2) {
                    (f == 46 ? m.bos_piece : m.eos_piece) = std::string(trainer.bytes());
                } else {
                    trainer.skip(w);
                }
            }
        } else {
            model.skip(wire);
        }
    }
    return m;
}

// sentencepiece ids -> fairseq dictionary ids (HF XLMRobertaTokenizer) around a tokenizer.
class FairseqIdTokenizer final : public Tokenizer {
public:
    FairseqIdTokenizer(std::unique_ptr<Tokenizer> inner, int32_t inner_unk)
        : inner_(std::move(inner)), inner_unk_(inner_unk), n_inner_(inner_->vocab_size()) {}

    std::vector<int32_t> encode(std::string_view text) const override {
        std::vector<int32_t> ids = inner_->encode(text);
        // HF XLMRobertaTokenizer._convert_token_to_id: unknown -> <unk>, others shifted.
        for (int32_t& id : ids) id = id == inner_unk_ ? kUnk : id + kOffset;
        return ids;
    }
    std::string decode_token(int32_t id) const override {
        check_id(id);
        return is_fairseq_only(id) ? fairseq_piece(id) : inner_->decode_token(id - kOffset);
    }
    std::string piece(int32_t id) const override {
        check_id(id);
        return is_fairseq_only(id) ? fairseq_piece(id) : inner_->piece(id - kOffset);
    }
    int64_t vocab_size() const override { return n_inner_ + 2; }
    int32_t bos_id() const override { return kBos; }
    int32_t eos_id() const override { return kEos; }
    bool adds_bos_by_default() const override { return true; }
    std::string kind() const override { return inner_->kind() + "-fairseq"; }
    std::vector<int32_t> template_prefix() const override { return {kBos}; }
    std::vector<int32_t> template_suffix() const override { return {kEos}; }

    EncodedPair encode_pair(std::string_view a, std::string_view b) const override {
        // HF XLMRobertaTokenizer.build_inputs_with_special_tokens: <s> A </s></s> B </s>, all
        // token type 0.
        EncodedPair out;
        out.ids = {kBos};
        const auto ea = encode(a), eb = encode(b);
        out.ids.insert(out.ids.end(), ea.begin(), ea.end());
        out.ids.insert(out.ids.end(), {kEos, kEos});
        out.ids.insert(out.ids.end(), eb.begin(), eb.end());
        out.ids.push_back(kEos);
        out.type_ids.assign(out.ids.size(), 0);
        return out;
    }

protected:
    std::string decode_ids(const std::vector<int32_t>& ids) const override {
        std::vector<int32_t> inner;
        for (int32_t id : ids)
            if (!is_special(id)) inner.push_back(id - kOffset);
        return inner_->decode(inner);
    }
    bool is_special(int32_t id) const override { return is_fairseq_only(id); }

private:
    static constexpr int32_t kBos = 0, kPad = 1, kEos = 2, kUnk = 3, kOffset = 1;
    bool is_fairseq_only(int32_t id) const { return id <= kUnk || id == n_inner_ + kOffset; }
    static std::string fairseq_piece(int32_t id) {
        switch (id) {
            case kBos:
                return "<s>";
            case kPad:
                return "<pad>";
            case kEos:
                return "</s>";
            case kUnk:
                return "<unk>";
            default:
                return "<mask>";
        }
    }
    void check_id(int32_t id) const {
        SS_CHECK(id >= 0 && id < vocab_size(), "token id out of range: ", id);
    }

    std::unique_ptr<Tokenizer> inner_;
    int32_t inner_unk_;
    int64_t n_inner_;
};

}  // namespace

const char* spm_id_map_name(SpmIdMap m) {
    return m == SpmIdMap::Fairseq ? "fairseq" : "identity";
}

SpmIdMap spm_id_map_for(const fs::path& model_file) {
    const json tok_config = read_json_beside(model_file, "tokenizer_config.json");
    const std::string cls = tok_config.value("tokenizer_class", std::string());
    if (cls.rfind("XLMRobertaTokenizer", 0) == 0) return SpmIdMap::Fairseq;
    const json config = read_json_beside(model_file, "config.json");
    if (config.value("model_type", std::string()) == "xlm-roberta") return SpmIdMap::Fairseq;
    return SpmIdMap::Identity;
}

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const fs::path& model_file,
                                                        SpmIdMap id_map) {
    const std::string origin = model_file.string();
    const SpmModel m = read_spm_model(read_file(model_file), origin);
    const auto n = static_cast<int32_t>(m.pieces.size());

    PipelineConfig cfg;
    cfg.origin = origin;
    NormalizerStep norm{NormalizerStep::Kind::SentencePiece, "", ""};
    norm.charsmap =
        std::make_shared<const PrecompiledCharsMap>(m.info.precompiled_charsmap, origin);
    norm.spm.add_dummy_prefix = m.info.add_dummy_prefix;
    norm.spm.remove_extra_whitespaces = m.info.remove_extra_whitespaces;
    norm.spm.escape_whitespaces = m.info.escape_whitespaces;
    cfg.normalizer.push_back(norm);
    // No pre-tokenizer: sentencepiece segments the whole normalized text at once.
    cfg.decoder.space_marker = kSpaceMarker;
    cfg.decoder.byte_fallback = true;
    cfg.decoder.strip_leading_spaces = m.info.add_dummy_prefix ? 1 : 0;

    int32_t unk = -1;
    bool has_bytes = false;
    double min_normal = std::numeric_limits<double>::infinity();
    std::vector<std::pair<std::string, double>> pieces;
    std::vector<bool> in_trie;
    pieces.reserve(m.pieces.size());
    for (int32_t id = 0; id < n; ++id) {
        const SpmPiece& p = m.pieces[static_cast<size_t>(id)];
        pieces.emplace_back(p.text, p.score);
        in_trie.push_back(p.type == kNormal || p.type == kUserDefined);
        if (p.type == kUnknown && unk < 0) unk = id;
        if (p.type == kByte) has_bytes = true;
        if (p.type == kNormal) min_normal = std::min(min_normal, double{p.score});
        if (p.type == kControl && p.text == m.bos_piece) cfg.bos = id;
        if (p.type == kControl && p.text == m.eos_piece) cfg.eos = id;
        // User-defined symbols are never split: matched whole in the raw text (sentencepiece
        // matches them in its normalizer).
        if (p.type == kUserDefined) cfg.added.push_back({p.text, id, false, false});
    }
    SS_CHECK_INPUT(unk >= 0, origin, "SentencePiece model without an <unk> piece");

    const json config = read_json_beside(model_file, "tokenizer_config.json");
    if (cfg.bos >= 0 && flag_or(config, "add_bos_token", true)) cfg.prefix.push_back(cfg.bos);
    if (cfg.eos >= 0 && flag_or(config, "add_eos_token", false)) cfg.suffix.push_back(cfg.eos);

    std::unique_ptr<Tokenizer> tok;
    if (m.info.model_type == "unigram") {
        UnigramOptions o;
        o.unk_id = unk;
        o.byte_fallback = has_bytes;
        o.sums = PathScore::Float;  // sentencepiece's own arithmetic
        o.in_trie = std::move(in_trie);
        if (std::isfinite(min_normal)) o.min_score = min_normal;
        cfg.kind = "spm-unigram";
        tok = make_pipeline_tokenizer(std::move(cfg), std::make_unique<UnigramModel>(pieces, o));
    } else if (m.info.model_type == "bpe") {
        Vocab vocab;
        std::vector<float> scores;
        for (int32_t id = 0; id < n; ++id) {
            vocab.set(id, pieces[static_cast<size_t>(id)].first, /*prefer_last=*/true);
            scores.push_back(m.pieces[static_cast<size_t>(id)].score);
        }
        BpeOptions opt;
        opt.order = MergeOrder::Scores;
        opt.byte_fallback = has_bytes;
        opt.unk_id = unk;
        BpeModel bpe(std::move(vocab), opt);
        bpe.set_scores(std::move(scores));
        cfg.kind = "spm-bpe";
        tok = make_pipeline_tokenizer(std::move(cfg), std::move(bpe));
    } else {
        throw UnsupportedError(
            origin, "SentencePiece model_type " + m.info.model_type + " (supported: unigram, bpe)");
    }
    if (id_map == SpmIdMap::Identity) return tok;
    // The fairseq dictionary puts <unk> at 3 and <mask> after the last piece: with fewer than
    // the 3 pieces every such model starts with (<unk>, <s>, </s>) its ids would not fit.
    SS_CHECK_INPUT(m.pieces.size() >= 3, origin, "has ", m.pieces.size(),
                   " pieces; read with the fairseq id map (XLM-RoBERTa) it needs at least 3");
    return std::make_unique<FairseqIdTokenizer>(std::move(tok), unk);
}

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const fs::path& model_file) {
    return load_sentencepiece_tokenizer(model_file, spm_id_map_for(model_file));
}

SpmModelInfo read_spm_model_info(std::string_view serialized, const std::string& origin) {
    // ModelProto: 1 pieces, 2 trainer_spec, 3 normalizer_spec. TrainerSpec: 3 model_type,
    // 35 byte_fallback. NormalizerSpec: 1 name, 2 precompiled_charsmap, 3 add_dummy_prefix,
    // 4 remove_extra_whitespaces, 5 escape_whitespaces.
    SpmModelInfo info;
    WireReader model(serialized, origin);
    while (!model.done()) {
        const auto [field, wire] = model.key();
        if (field == 1 && wire == 2) {
            model.bytes();
            ++info.n_pieces;
        } else if (field == 2 && wire == 2) {
            WireReader trainer(model.bytes(), origin);
            while (!trainer.done()) {
                const auto [f, w] = trainer.key();
                if (f == 3 && w == 0) {
                    static const char* const kTypes[] = {"?", "unigram", "bpe", "word", "char"};
                    const uint64_t t = trainer.varint();
                    SS_CHECK_INPUT(t >= 1 && t <= 4, origin, "unknown model_type ", t);
                    info.model_type = kTypes[t];
                } else if (f == 35 && w == 0) {
                    info.byte_fallback = trainer.varint() != 0;
                } else {
                    trainer.skip(w);
                }
            }
        } else if (field == 3 && wire == 2) {
            WireReader norm(model.bytes(), origin);
            while (!norm.done()) {
                const auto [f, w] = norm.key();
                if (f == 1 && w == 2) {
                    info.normalizer_name = std::string(norm.bytes());
                } else if (f == 2 && w == 2) {
                    info.precompiled_charsmap = std::string(norm.bytes());
                } else if (f >= 3 && f <= 5 && w == 0) {
                    const bool v = norm.varint() != 0;
                    (f == 3   ? info.add_dummy_prefix
                     : f == 4 ? info.remove_extra_whitespaces
                              : info.escape_whitespaces) = v;
                } else {
                    norm.skip(w);
                }
            }
        } else {
            model.skip(wire);
        }
    }
    SS_CHECK_INPUT(info.n_pieces > 0, origin, "not a SentencePiece model (no pieces)");
    check_limit(origin, Limit::VocabSize, "pieces", uint64_t(info.n_pieces));
    return info;
}

}  // namespace sinkscope::tokenizer
