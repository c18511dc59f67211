// Hugging Face tokenizer.json, every model type (BPE, WordPiece, Unigram, WordLevel) with its
// normalizers, pre-tokenizers, post-processor and decoder; then a text is encoded and decoded.
// Input: the file's bytes; a text to encode may follow a line "\n#TEXT\n".
#include "fuzz_common.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto parts = fuzz::split_at(fuzz::as_view(data, size), "\n#TEXT\n");
    const std::string_view json = parts.first;
    std::string_view text = parts.second;
    if (text.empty())
        text = "Hello, world! It's 2026: caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 [CLS] x";
    const auto dir = fuzz::fresh_dir("tok");
    const auto path = fuzz::write_file(dir / "tokenizer.json", json);
    fuzz::expect_clean([&] {
        const auto tok = tokenizer::load_hf_tokenizer(path);
        for (auto policy : {tokenizer::BosPolicy::ModelDefault, tokenizer::BosPolicy::Never})
            (void)tok->decode(tok->encode_with_policy(text, policy));
        try {
            (void)tok->encode_pair(text, "second");
        } catch (const UnsupportedError&) {
        }
    });
    return 0;
}
