// llama2.c checkpoints (7 int32 header + float32 weights) and tokenizer.bin vocabularies.
// Input byte 0 chooses: even = checkpoint (the rest of the input), odd = tokenizer.bin with the
// vocabulary size - 1 in bytes 1-2.
#include "fuzz_common.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 3) return 0;
    if (data[0] % 2 == 0) {
        const auto path =
            fuzz::write_file(fuzz::scratch_dir() / "model.bin", fuzz::as_view(data + 1, size - 1));
        fuzz::expect_clean([&] {
            io::Llama2cHeader header{};
            const auto store = io::open_llama2c(path, &header);
            for (const std::string& name : store->names()) (void)io::to_f32(store->get(name));
        });
        return 0;
    }
    // The vocabulary size comes from the checkpoint's header, checked there to be positive.
    const int64_t vocab = 1 + (int64_t(data[1]) | (int64_t(data[2]) << 8));
    const auto path =
        fuzz::write_file(fuzz::scratch_dir() / "tokenizer.bin", fuzz::as_view(data + 3, size - 3));
    fuzz::expect_clean([&] {
        const auto tok = tokenizer::load_llama2c_tokenizer(path, vocab);
        (void)tok->decode(tok->encode_with_policy("Once upon a time <s> \xc3\xa9",
                                                  tokenizer::BosPolicy::ModelDefault));
    });
    return 0;
}
