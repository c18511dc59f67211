// SentencePiece .model tokenizers: libsentencepiece does normalization and segmentation; this
// maps its ids to the model's (identity or fairseq) and reads the few ModelProto fields we need.
#include "sinkscope/tokenizer/sentencepiece.hpp"

#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"

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
            SS_CHECK_INPUT(pos_ < data_.size(), origin_, "truncated protobuf varint at byte ", pos_);
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
    try {
        json j = json::parse(read_file(p));
        return j.is_object() ? j : json::object();
    } catch (const json::exception& e) {
        throw InputError(p.string(), std::string("not valid JSON: ") + e.what());
    }
}

bool flag_or(const json& obj, const char* key, bool fallback) {
    return obj.contains(key) && obj.at(key).is_boolean() ? obj.at(key).get<bool>() : fallback;
}

class SentencePieceTokenizer final : public Tokenizer {
  public:
    SentencePieceTokenizer(const fs::path& file, SpmIdMap map) : map_(map) {
        const std::string origin = file.string();
        const std::string serialized = read_file(file);
        info_ = read_spm_model_info(serialized, origin);
        const auto status = sp_.LoadFromSerializedProto(serialized);
        if (!status.ok())
            throw InputError(origin, std::string("not a SentencePiece model: ") + status.message());
        n_pieces_ = sp_.GetPieceSize();
        SS_CHECK_INPUT(n_pieces_ > 0, origin, "SentencePiece model without pieces");
        if (map_ == SpmIdMap::Fairseq) {
            SS_CHECK_INPUT(sp_.unk_id() >= 0, origin, "fairseq id map needs an <unk> piece");
            prefix_ = {kFairseqBos};
            suffix_ = {kFairseqEos};
            return;
        }
        const json config = read_json_beside(file, "tokenizer_config.json");
        if (sp_.bos_id() >= 0 && flag_or(config, "add_bos_token", true))
            prefix_.push_back(sp_.bos_id());
        if (sp_.eos_id() >= 0 && flag_or(config, "add_eos_token", false))
            suffix_.push_back(sp_.eos_id());
    }

    std::vector<int32_t> encode(std::string_view text) const override {
        std::vector<int> ids;
        const auto status = sp_.Encode(text, &ids);
        if (!status.ok())
            throw InternalError(std::string("sentencepiece Encode failed: ") + status.message());
        std::vector<int32_t> out(ids.size());
        for (size_t i = 0; i < ids.size(); ++i) out[i] = to_model_id(ids[i]);
        return out;
    }

    std::string decode_token(int32_t id) const override {
        check_id(id);
        const int spm = to_spm_id(id);
        if (spm < 0) return fairseq_piece(id);
        if (sp_.IsByte(spm)) {
            const std::string& p = sp_.IdToPiece(spm);  // "<0xXX>"
            return std::string(1, static_cast<char>(std::stoi(p.substr(3, 2), nullptr, 16)));
        }
        std::string out = sp_.IdToPiece(spm);
        for (size_t hit; (hit = out.find(kSpaceMarker)) != std::string::npos;)
            out.replace(hit, 3, " ");
        return out;
    }

    std::string piece(int32_t id) const override {
        check_id(id);
        const int spm = to_spm_id(id);
        return spm < 0 ? fairseq_piece(id) : sp_.IdToPiece(spm);
    }

    int64_t vocab_size() const override {
        return map_ == SpmIdMap::Fairseq ? n_pieces_ + 2 : n_pieces_;
    }
    int32_t bos_id() const override {
        return map_ == SpmIdMap::Fairseq ? kFairseqBos : sp_.bos_id();
    }
    int32_t eos_id() const override {
        return map_ == SpmIdMap::Fairseq ? kFairseqEos : sp_.eos_id();
    }
    bool adds_bos_by_default() const override {
        return !prefix_.empty() && prefix_.front() == bos_id();
    }
    std::string kind() const override {
        return "spm-" + info_.model_type + (map_ == SpmIdMap::Fairseq ? "-fairseq" : "");
    }
    std::vector<int32_t> template_prefix() const override { return prefix_; }
    std::vector<int32_t> template_suffix() const override { return suffix_; }

    EncodedPair encode_pair(std::string_view a, std::string_view b) const override {
        if (map_ != SpmIdMap::Fairseq) return Tokenizer::encode_pair(a, b);
        // HF XLMRobertaTokenizer.build_inputs_with_special_tokens: <s> A </s></s> B </s>, all
        // token type 0.
        EncodedPair out;
        out.ids = {kFairseqBos};
        const auto ea = encode(a), eb = encode(b);
        out.ids.insert(out.ids.end(), ea.begin(), ea.end());
        out.ids.push_back(kFairseqEos);
        out.ids.push_back(kFairseqEos);
        out.ids.insert(out.ids.end(), eb.begin(), eb.end());
        out.ids.push_back(kFairseqEos);
        out.type_ids.assign(out.ids.size(), 0);
        return out;
    }

  protected:
    std::string decode_ids(const std::vector<int32_t>& ids) const override {
        std::string out = Tokenizer::decode_ids(ids);
        // The dummy-prefix space sentencepiece put before the text.
        if (info_.add_dummy_prefix && !out.empty() && out[0] == ' ') out.erase(0, 1);
        return out;
    }
    bool is_special(int32_t id) const override {
        const int spm = to_spm_id(id);
        if (spm < 0) return true;  // the fairseq specials and <mask>
        return sp_.IsControl(spm);
    }

  private:
    static constexpr int32_t kFairseqBos = 0, kFairseqPad = 1, kFairseqEos = 2, kFairseqUnk = 3;
    static constexpr int32_t kFairseqOffset = 1;

    int32_t to_model_id(int spm) const {
        if (map_ == SpmIdMap::Identity) return spm;
        // HF XLMRobertaTokenizer._convert_token_to_id: unknown -> <unk>, others shifted.
        return spm == sp_.unk_id() ? kFairseqUnk : spm + kFairseqOffset;
    }
    // -1 for the fairseq-only ids (<s> <pad> </s> <unk> <mask>).
    int to_spm_id(int32_t id) const {
        if (map_ == SpmIdMap::Identity) return id;
        if (id <= kFairseqUnk || id == n_pieces_ + kFairseqOffset) return -1;
        return id - kFairseqOffset;
    }
    std::string fairseq_piece(int32_t id) const {
        switch (id) {
            case kFairseqBos:
                return "<s>";
            case kFairseqPad:
                return "<pad>";
            case kFairseqEos:
                return "</s>";
            case kFairseqUnk:
                return "<unk>";
            default:
                return "<mask>";
        }
    }
    void check_id(int32_t id) const {
        SS_CHECK(id >= 0 && id < vocab_size(), "token id out of range: ", id);
    }

    sentencepiece::SentencePieceProcessor sp_;
    SpmIdMap map_;
    SpmModelInfo info_;
    int64_t n_pieces_ = 0;
    std::vector<int32_t> prefix_, suffix_;
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
    return std::make_unique<SentencePieceTokenizer>(model_file, id_map);
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
                    (f == 3 ? info.add_dummy_prefix
                            : f == 4 ? info.remove_extra_whitespaces : info.escape_whitespaces) = v;
                } else {
                    norm.skip(w);
                }
            }
        } else {
            model.skip(wire);
        }
    }
    SS_CHECK_INPUT(info.n_pieces > 0, origin, "not a SentencePiece model (no pieces)");
    return info;
}

}  // namespace sinkscope::tokenizer
