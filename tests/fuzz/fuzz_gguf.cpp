// GGUF files: header, metadata, tensor infos, every tensor dequantized (all ggml types), and the
// vocabulary (tokenizer.ggml.*) with a sentence encoded and decoded.
#include <memory>

#include "fuzz_common.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

using namespace sinkscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path =
        fuzz::write_file(fuzz::scratch_dir() / "model.gguf", fuzz::as_view(data, size));
    fuzz::expect_clean([&] {
        auto file = std::make_shared<const io::GgufFile>(path);
        for (const auto& [key, value] : file->metadata()) (void)key;
        fuzz::read_tensors(*io::open_gguf_weights(file));
    });
    fuzz::expect_clean([&] {
        const auto tok = tokenizer::load_gguf_tokenizer(path);
        const auto ids =
            tok->encode_with_policy("Once upon a time, 12 cats ran. \xc3\xa9\xe2\x96\x81",
                                    tokenizer::BosPolicy::ModelDefault);
        (void)tok->decode(ids);
    });
    return 0;
}
