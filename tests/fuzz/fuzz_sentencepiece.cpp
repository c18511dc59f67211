// SentencePiece .model files (protobuf ModelProto: pieces, trainer and normalizer specs, the
// precompiled charsmap), both id maps, then a text encoded and decoded.
#include "fuzz_common.hpp"
#include "sinkscope/tokenizer/sentencepiece.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path =
        fuzz::write_file(fuzz::scratch_dir() / "tokenizer.model", fuzz::as_view(data, size));
    for (auto map : {tokenizer::SpmIdMap::Identity, tokenizer::SpmIdMap::Fairseq}) {
        fuzz::expect_clean([&] {
            const auto tok = tokenizer::load_sentencepiece_tokenizer(path, map);
            const auto ids = tok->encode_with_policy(
                "  Hello  World! \xef\xbc\xa1\xe2\x91\xa0 caf\xc3\xa9 \xf0\x9f\x99\x82 <unk>",
                tokenizer::BosPolicy::ModelDefault);
            (void)tok->decode(ids);
        });
    }
    return 0;
}
