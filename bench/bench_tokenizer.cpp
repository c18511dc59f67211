// Tokenizer throughput: encode and decode a megabyte of English text with the shared vocabularies
// (needs ../shared or $SINKSCOPE_SHARED; skipped otherwise).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {
fs::path shared_dir() {
    if (const char* e = std::getenv("SINKSCOPE_SHARED")) return e;
    return fs::path("..") / "shared";
}

std::string megabyte_of_text() {
    const std::string story =
        read_file(shared_dir() / "reference/llama2c_stories260K_greedy_onceupon.txt");
    std::string text;
    for (int k = 0; text.size() < 1000000; ++k) text += story + std::to_string(k) + "\n";
    return text;
}

void run(benchmark::State& state, const char* vocab) {
    const fs::path path = shared_dir() / "models/tokenizers" / vocab;
    if (!fs::exists(path)) {
        state.SkipWithError("../shared not found (set SINKSCOPE_SHARED)");
        return;
    }
    auto tok = tokenizer::load_gguf_tokenizer(path);
    const std::string text = megabyte_of_text();
    size_t n_tokens = 0;
    for (auto _ : state) {
        auto ids = tok->encode(text);
        n_tokens = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
    state.counters["tokens/s"] = benchmark::Counter(double(n_tokens) * double(state.iterations()),
                                                    benchmark::Counter::kIsRate);
}
}  // namespace

BENCHMARK_CAPTURE(run, gpt2, "ggml-vocab-gpt-2.gguf")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, llama_spm, "ggml-vocab-llama-spm.gguf")->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
