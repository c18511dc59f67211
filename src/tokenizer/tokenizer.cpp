// Tokenizer base: BOS policy and decoding shared by every vocabulary format.
#include "sinkscope/tokenizer/tokenizer.hpp"

#include "sinkscope/core/error.hpp"

namespace sinkscope::tokenizer {

const char* bos_policy_name(BosPolicy p) {
    switch (p) {
        case BosPolicy::ModelDefault:
            return "default";
        case BosPolicy::Always:
            return "always";
        case BosPolicy::Never:
            return "never";
    }
    return "?";
}

BosPolicy parse_bos_policy(const std::string& s) {
    if (s == "default") return BosPolicy::ModelDefault;
    if (s == "always") return BosPolicy::Always;
    if (s == "never") return BosPolicy::Never;
    throw UsageError("unknown BOS policy '" + s + "' (expected default, always or never)");
}

std::vector<int32_t> Tokenizer::template_prefix() const {
    if (adds_bos_by_default() && bos_id() >= 0) return {bos_id()};
    return {};
}

std::vector<int32_t> Tokenizer::encode_with_policy(std::string_view text, BosPolicy policy) const {
    std::vector<int32_t> body = encode(text);
    if (policy == BosPolicy::Never) return body;
    std::vector<int32_t> out = template_prefix();
    if (policy == BosPolicy::Always && out.empty()) {
        if (bos_id() < 0)
            throw UsageError(detail::concat("BOS policy 'always' but the ", kind(),
                                            " tokenizer has no BOS token"));
        out.push_back(bos_id());
    }
    out.insert(out.end(), body.begin(), body.end());
    const std::vector<int32_t> suffix = template_suffix();
    out.insert(out.end(), suffix.begin(), suffix.end());
    return out;
}

Tokenizer::EncodedPair Tokenizer::encode_pair(std::string_view, std::string_view) const {
    throw UnsupportedError("the " + kind() + " tokenizer has no sentence-pair template");
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
    const int64_t n_vocab = vocab_size();
    for (int32_t id : ids)
        if (id < 0 || id >= n_vocab)
            throw UsageError(
                detail::concat("token id ", id, " is outside the vocabulary (size ", n_vocab, ")"));
    return decode_ids(ids);
}

std::string Tokenizer::decode_ids(const std::vector<int32_t>& ids) const {
    std::string out;
    for (int32_t id : ids)
        if (!is_special(id)) out += decode_token(id);
    return out;
}

}  // namespace sinkscope::tokenizer
