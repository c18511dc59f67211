// Loader throughput: convert_to_f32 per dtype (values/s), and opening a safetensors file with
// many tensors (header parse + validation; the data is only mapped).
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "sinkscope/io/weights.hpp"

using namespace sinkscope::io;

namespace {
constexpr WeightDType k_dtypes[] = {WeightDType::F32, WeightDType::F16, WeightDType::BF16,
                                    WeightDType::Q8_0};

void BM_ConvertToF32(benchmark::State& state) {
    const WeightDType dtype = k_dtypes[state.range(0)];
    const int64_t n = state.range(1);
    std::vector<uint8_t> bytes(size_t(weight_dtype_n_bytes(dtype, n)));
    std::mt19937 rng(7);
    for (auto& b : bytes) b = uint8_t(rng() & 0x3f);  // small exponents: finite values
    TensorView v;
    v.name = "bench";
    v.dtype = dtype;
    v.shape = {n};
    v.data = bytes.data();
    v.n_bytes = bytes.size();
    std::vector<float> out(static_cast<size_t>(n));  // [n] f32
    for (auto _ : state) {
        convert_to_f32(v, out.data());
        benchmark::DoNotOptimize(out.data());
    }
    state.SetLabel(weight_dtype_name(dtype));
    state.counters["values/s"] =
        benchmark::Counter(double(n) * double(state.iterations()), benchmark::Counter::kIsRate);
    state.SetBytesProcessed(int64_t(bytes.size()) * state.iterations());
}
BENCHMARK(BM_ConvertToF32)->ArgsProduct({{0, 1, 2, 3}, {1 << 16, 1 << 22}});

// A file of n_tensors F32 [64] tensors, as a sharded 7B checkpoint has a few hundred per shard.
void BM_OpenSafetensors(benchmark::State& state) {
    const int64_t n_tensors = state.range(0);
    const auto path = std::filesystem::temp_directory_path() /
                      ("sinkscope-bench-" + std::to_string(n_tensors) + ".safetensors");
    std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
    for (int64_t i = 0; i < n_tensors; ++i)
        header += ",\"model.layers." + std::to_string(i) +
                  ".w\":{\"dtype\":\"F32\",\"shape\":[64]," + "\"data_offsets\":[" +
                  std::to_string(256 * i) + "," + std::to_string(256 * (i + 1)) + "]}";
    header += "}";
    const uint64_t len = header.size();
    {
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(&len), 8);
        f << header << std::string(size_t(256 * n_tensors), '\0');
    }
    for (auto _ : state) {
        auto store = open_safetensors(path);
        benchmark::DoNotOptimize(store.get());
    }
    state.counters["tensors/s"] = benchmark::Counter(double(n_tensors) * double(state.iterations()),
                                                     benchmark::Counter::kIsRate);
    std::filesystem::remove(path);
}
BENCHMARK(BM_OpenSafetensors)->Arg(300)->Arg(3000)->Unit(benchmark::kMillisecond);
}  // namespace
BENCHMARK_MAIN();
