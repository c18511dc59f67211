// Tokenizers: one interface over Hugging Face tokenizer.json, GGUF vocabularies and llama2.c
// tok*.bin files. Special tokens (BOS/CLS...) are added by the caller through BosPolicy so the
// choice is explicit and recorded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sinkscope::tokenizer {

enum class BosPolicy {
    ModelDefault,  // what the model's tokenizer config says (add_bos_token / post_processor)
    Always,        // prepend BOS even if the config says no
    Never,         // never prepend
};
const char* bos_policy_name(BosPolicy p);
BosPolicy parse_bos_policy(const std::string& s);  // "default" | "always" | "never"

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    // Text -> ids, without any special tokens.
    virtual std::vector<int32_t> encode(std::string_view text) const = 0;
    // One id -> its text (bytes decoded, SentencePiece '▁' turned into a space).
    virtual std::string decode_token(int32_t id) const = 0;
    // The raw piece string as stored in the vocabulary (for tables/reports).
    virtual std::string piece(int32_t id) const = 0;
    virtual int64_t vocab_size() const = 0;
    virtual int32_t bos_id() const { return -1; }  // -1: none
    virtual int32_t eos_id() const { return -1; }
    // Whether the model's own configuration prepends BOS (used by BosPolicy::ModelDefault).
    virtual bool adds_bos_by_default() const { return false; }
    virtual std::string kind() const = 0;  // e.g. "bpe-byte-level", "spm-bpe", "llama2c"
    // Special tokens the model's own template puts around one sequence (HF post_processor:
    // [CLS] ... [SEP], <s> ... </s>). Default: BOS when adds_bos_by_default(), nothing after.
    virtual std::vector<int32_t> template_prefix() const;
    virtual std::vector<int32_t> template_suffix() const { return {}; }

    // Encodes and applies the BOS policy: ModelDefault = prefix + text + suffix of the
    // model's template; Always = the same, with BOS prepended when the template has no
    // prefix; Never = the text's ids only (no special tokens at all).
    std::vector<int32_t> encode_with_policy(std::string_view text, BosPolicy policy) const;
    // A sentence pair joined by the model's template (HF tokenizer(a, b) with special
    // tokens): ids and token_type_ids. Throws UnsupportedError when the model has no pair
    // template.
    struct EncodedPair {
        std::vector<int32_t> ids;
        std::vector<int32_t> type_ids;
    };
    virtual EncodedPair encode_pair(std::string_view a, std::string_view b) const;

    // Ids -> text. Special tokens (BOS, EOS, added special tokens) are skipped, and the
    // dummy-prefix space a SentencePiece tokenizer added is removed, so that
    // decode(encode_with_policy(x, any)) == x for text the vocabulary covers.
    std::string decode(const std::vector<int32_t>& ids) const;

    // The file the tokenizer was read from (for messages about the ids it produces).
    const std::string& origin() const { return origin_; }
    void set_origin(std::string origin) { origin_ = std::move(origin); }

protected:
    // decode() without argument checks; the default concatenates decode_token of each
    // non-special id.
    virtual std::string decode_ids(const std::vector<int32_t>& ids) const;
    virtual bool is_special(int32_t id) const { return id == bos_id() || id == eos_id(); }

private:
    std::string origin_;
};

// Hugging Face tokenizer.json (+ tokenizer_config.json beside it when present).
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::filesystem::path& tokenizer_json);
// Vocabulary inside a GGUF file (tokenizer.ggml.model = llama | gpt2).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& gguf_path);
// llama2.c tok*.bin; `vocab_size` comes from the checkpoint header.
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::filesystem::path& path,
                                                  int64_t vocab_size);

}  // namespace sinkscope::tokenizer
