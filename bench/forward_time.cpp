// Times sinkscope's forward on an HF checkpoint for bench/compare_forward.py: loads the model once
// (not timed), runs one warm-up forward and `reps` timed ones on the first T ids of a .npy, and
// prints one JSON line (seconds per forward, peak RSS). Optionally writes the logits and one
// layer's pattern as .npy for the comparison's agreement check.
//
// usage: forward_time MODEL_DIR IDS.npy T THREADS CAPTURE REPS [CHECK_DIR]
//   CAPTURE: none (logits only), attention (every layer's scores + pattern kept), handover
//   (attention, then the fp64 host hand-over to the metrics, analysis::to_attention_input)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/core/allocator.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/model/model.hpp"

using namespace sinkscope;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// [rows, cols] f32 tensor -> .npy
void write_f32(const std::string& path, const at::Tensor& t) {
    const at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
    const float* p = c.data_ptr<float>();
    std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
    io::write_npy(path, io::make_npy_f32(shape, std::vector<float>(p, p + c.numel())));
}

// forward_time --gemm M K N THREADS REPS: the rate of one float32 product [M, K] x [K, N]^T
// (at::linear, as the forward's) on THREADS libtorch + BLAS threads, best of REPS, in GFLOP/s:
// the machine's GEMM rate the forward is held against (issue 47).
int gemm_rate(int argc, char** argv) {
    if (argc < 7) {
        std::fprintf(stderr, "usage: forward_time --gemm M K N THREADS REPS\n");
        return 2;
    }
    const int64_t M = std::atoll(argv[2]), K = std::atoll(argv[3]), N = std::atoll(argv[4]);
    const int threads = std::atoi(argv[5]), reps = std::atoi(argv[6]);
    model::set_intra_op_threads(threads);
    const at::Tensor x = at::randn({M, K}), w = at::randn({N, K});
    double best = 1e300;
    for (int r = 0; r <= reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const at::Tensor y = at::linear(x, w);
        const double s = seconds_since(t0);
        if (r > 0 && s < best) best = s;  // r = 0: warm-up
    }
    std::printf(
        "{\"gemm\": [%lld, %lld, %lld], \"threads\": %d, \"seconds\": %.5f, "
        "\"gflops\": %.2f}\n",
        static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(N), threads,
        best, 2.0 * double(M) * double(K) * double(N) / best / 1e9);
    return 0;
}

int run(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "--gemm") return gemm_rate(argc, argv);
    if (argc < 7) {
        std::fprintf(stderr,
                     "usage: forward_time MODEL_DIR IDS.npy T THREADS none|attention|handover "
                     "REPS [CHECK_DIR]\n");
        return 2;
    }
    const std::string dir = argv[1], ids_path = argv[2], mode = argv[5];
    const int64_t T = std::atoll(argv[3]);
    const int threads = std::atoi(argv[4]);
    const int reps = std::atoi(argv[6]);
    if (mode != "none" && mode != "attention" && mode != "handover") {
        std::fprintf(stderr, "forward_time: unknown capture mode '%s'\n", mode.c_str());
        return 2;
    }
    const std::vector<int64_t> all_ids = io::read_npy(ids_path).to_i64();
    if (T <= 0 || static_cast<size_t>(T) > all_ids.size()) {
        std::fprintf(stderr, "forward_time: %s holds %zu ids, fewer than T = %lld\n",
                     ids_path.c_str(), all_ids.size(), static_cast<long long>(T));
        return 2;
    }
    const std::vector<int32_t> ids(all_ids.begin(), all_ids.begin() + T);

    model::LoadOptions lo;
    lo.runtime.n_threads = threads;
    lo.load_tokenizer = false;
    const auto t_load = std::chrono::steady_clock::now();
    const model::Model m = model::load_model(dir, lo);
    const double load_s = seconds_since(t_load);
    const int64_t rss_load = peak_rss_bytes();

    const model::CaptureSpec spec =
        mode == "none" ? model::CaptureSpec() : model::CaptureSpec::attention();
    std::vector<double> fwd_s, handover_s;
    for (int r = 0; r <= reps; ++r) {  // r = 0: warm-up
        const auto t0 = std::chrono::steady_clock::now();
        model::ForwardResult res = m.forward(ids, spec);
        const double f = seconds_since(t0);
        double h = 0;
        if (mode == "handover") {
            const auto t1 = std::chrono::steady_clock::now();
            const metrics::AttentionInput in = analysis::to_attention_input(res, m.config(), ids);
            h = seconds_since(t1);
            if (in.pattern.empty()) return 1;
        }
        if (r == 0 && argc > 7) {
            const std::string out = argv[7];
            write_f32(out + "/sinkscope_logits.npy", res.logits.select(0, 0));  // [T, d_vocab]
            if (mode != "none") {
                const int64_t L = m.config().n_layers;
                for (int64_t l : {int64_t(0), L - 1}) {
                    const std::string n = model::hook_name(model::HookPoint::Pattern, l);
                    write_f32(out + "/sinkscope_pattern_" + std::to_string(l) + ".npy",
                              res.captured.at(n).select(0, 0));  // [H, T, T]
                }
            }
        }
        if (r > 0) {
            fwd_s.push_back(f);
            handover_s.push_back(h);
        }
    }
    auto list = [](const std::vector<double>& v) {
        std::string s = "[";
        for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
        return s + "]";
    };
    // The matrix products of a Llama-layout forward (q, k, v, o, gate, up, down, lm_head):
    // 2 T n_out n_in each, the attention's own products aside.
    const model::ModelConfig& c = m.config();
    const double qd = double(c.n_heads * c.d_head), kd = double(c.n_kv_heads * c.d_head);
    const double linear_params = double(c.n_layers) * (double(c.d_model) * (2 * qd + 2 * kd) +
                                                       3.0 * double(c.d_model) * double(c.d_mlp)) +
                                 double(c.d_vocab) * double(c.d_model);
    std::printf(
        "{\"side\": \"sinkscope\", \"T\": %lld, \"threads\": %d, \"torch_threads\": %d, "
        "\"capture\": \"%s\", \"load_s\": %.4f, \"forward_s\": %s, \"handover_s\": %s, "
        "\"rss_after_load_mb\": %.1f, \"peak_rss_mb\": %.1f, \"linear_gflop\": %.2f}\n",
        static_cast<long long>(T), threads, at::get_num_threads(), mode.c_str(), load_s,
        list(fwd_s).c_str(), list(handover_s).c_str(), double(rss_load) / (1 << 20),
        double(peak_rss_bytes()) / (1 << 20), 2.0 * double(T) * linear_params / 1e9);
    return 0;
}

}  // namespace

// The CLI's run-time policy (idle threads, huge pages) before the libraries initialise
// (core/allocator.hpp).
[[gnu::section(".preinit_array"),
  gnu::used]] static void (*const preinit_runtime_policy)(int, char**, char**) =
    [](int, char** argv, char** envp) { sinkscope::restart_with_runtime_policy(argv, envp); };

int main(int argc, char** argv) {
    sinkscope::set_allocator_policy();  // as the CLI's main
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "forward_time: %s\n", e.what());
        return 1;
    }
}
