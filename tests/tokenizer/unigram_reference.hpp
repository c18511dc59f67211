// Test helpers for the Unigram tokenizers: libsentencepiece is the reference. A tiny Unigram
// model is trained in memory with SentencePieceTrainer, and a Hugging Face tokenizer.json is
// written from its pieces and scores the way transformers' SpmConverter / XLMRobertaConverter
// lay it out, so that load_hf_tokenizer can be compared id for id with the processor.
#pragma once

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sinkscope/tokenizer/sentencepiece.hpp"

namespace sinkscope::testutil {

class VectorSentences final : public sentencepiece::SentenceIterator {
public:
    explicit VectorSentences(const std::vector<std::string>& lines) : lines_(lines) {}
    bool done() const override { return i_ >= lines_.size(); }
    void Next() override { ++i_; }
    const std::string& value() const override { return lines_[i_]; }
    sentencepiece::util::Status status() const override { return {}; }

private:
    const std::vector<std::string>& lines_;
    size_t i_ = 0;
};

struct SpmTrainOptions {
    std::string normalization = "identity";  // or nmt_nfkc
    bool byte_fallback = false;
    int vocab_size = 400;  // plus 256 with byte_fallback (the byte pieces are required)
    std::string model_type = "unigram";
};

// Serialized ModelProto of a Unigram model trained on `lines` (deterministic: one thread).
inline std::string train_unigram(const std::vector<std::string>& lines, const SpmTrainOptions& o) {
    VectorSentences it(lines);
    std::string serialized;
    const std::unordered_map<std::string, std::string> args = {
        {"model_type", o.model_type},
        {"vocab_size", std::to_string(o.vocab_size + (o.byte_fallback ? 256 : 0))},
        {"hard_vocab_limit", "false"},
        {"character_coverage", "1.0"},
        {"normalization_rule_name", o.normalization},
        {"byte_fallback", o.byte_fallback ? "true" : "false"},
        {"num_threads", "1"},
        {"minloglevel", "2"},
        {"model_prefix", ""},
    };
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &serialized);
    if (!status.ok()) throw std::runtime_error(std::string("spm training: ") + status.message());
    return serialized;
}

inline std::string base64(std::string_view bytes) {
    static const char* const kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) |
                           (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
        for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
    }
    if (i + 1 == bytes.size()) {
        const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += "==";
    } else if (i + 2 == bytes.size()) {
        const uint32_t v =
            (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8);
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += '=';
    }
    return out;
}

enum class JsonLayout {
    Spm,      // ids = sentencepiece ids (SpmConverter)
    Fairseq,  // XLMRobertaConverter: <s> <pad> </s> <unk>, pieces[3:], <mask>
};

// tokenizer.json for a trained model: normalizer [Precompiled (when the model has rules),
// Strip(right), Replace(" {2,}" -> " ")], Metaspace pre-tokenizer and decoder, Unigram model.
inline nlohmann::json unigram_tokenizer_json(const std::string& serialized, JsonLayout layout) {
    using nlohmann::json;
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.LoadFromSerializedProto(serialized).ok()) throw std::runtime_error("bad model");
    const auto info = tokenizer::read_spm_model_info(serialized, "<trained>");
    json vocab = json::array();
    json added = json::array();
    bool byte_fallback = false;
    auto add_special = [&](const std::string& content, int id) {
        added.push_back({{"id", id},
                         {"content", content},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    };
    int unk_id = sp.unk_id();
    if (layout == JsonLayout::Fairseq) {
        for (const char* s : {"<s>", "<pad>", "</s>", "<unk>"}) {
            add_special(s, static_cast<int>(vocab.size()));
            vocab.push_back({s, 0.0});
        }
        unk_id = 3;
    }
    const int first = layout == JsonLayout::Fairseq ? 3 : 0;
    for (int id = first; id < sp.GetPieceSize(); ++id) {
        byte_fallback = byte_fallback || sp.IsByte(id);
        if (layout == JsonLayout::Spm && (sp.IsControl(id) || sp.IsUnknown(id)))
            add_special(sp.IdToPiece(id), id);
        vocab.push_back({sp.IdToPiece(id), static_cast<double>(sp.GetScore(id))});
    }
    if (layout == JsonLayout::Fairseq) {
        add_special("<mask>", static_cast<int>(vocab.size()));
        vocab.push_back({"<mask>", 0.0});
    }
    json normalizers = json::array();
    if (!info.precompiled_charsmap.empty())
        normalizers.push_back(
            {{"type", "Precompiled"}, {"precompiled_charsmap", base64(info.precompiled_charsmap)}});
    normalizers.push_back({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}});
    normalizers.push_back(
        {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
    const json metaspace = {{"type", "Metaspace"},
                            {"replacement", "\xE2\x96\x81"},
                            {"prepend_scheme", "always"},
                            {"split", true}};
    json post = nullptr;
    if (layout == JsonLayout::Fairseq) {
        auto special = [](const char* id) {
            return json{{"SpecialToken", {{"id", id}, {"type_id", 0}}}};
        };
        auto seq = [](const char* id) { return json{{"Sequence", {{"id", id}, {"type_id", 0}}}}; };
        post = {{"type", "TemplateProcessing"},
                {"single", {special("<s>"), seq("A"), special("</s>")}},
                {"pair",
                 {special("<s>"), seq("A"), special("</s>"), special("</s>"), seq("B"),
                  special("</s>")}},
                {"special_tokens",
                 {{"<s>", {{"id", "<s>"}, {"ids", {0}}, {"tokens", {"<s>"}}}},
                  {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}};
    }
    json decoder = metaspace;
    if (byte_fallback)
        decoder = {{"type", "Sequence"},
                   {"decoders", json::array({json{{"type", "ByteFallback"}}, metaspace})}};
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
            {"pre_tokenizer", metaspace},
            {"post_processor", post},
            {"decoder", decoder},
            {"model",
             {{"type", "Unigram"},
              {"unk_id", unk_id},
              {"vocab", vocab},
              {"byte_fallback", byte_fallback}}}};
}

inline void write_file(const std::filesystem::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary) << s;
}

}  // namespace sinkscope::testutil
