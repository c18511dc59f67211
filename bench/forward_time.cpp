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

int run(int argc, char** argv) {
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
    std::printf(
        "{\"side\": \"sinkscope\", \"T\": %lld, \"threads\": %d, \"torch_threads\": %d, "
        "\"capture\": \"%s\", \"load_s\": %.4f, \"forward_s\": %s, \"handover_s\": %s, "
        "\"rss_after_load_mb\": %.1f, \"peak_rss_mb\": %.1f}\n",
        static_cast<long long>(T), threads, at::get_num_threads(), mode.c_str(), load_s,
        list(fwd_s).c_str(), list(handover_s).c_str(), double(rss_load) / (1 << 20),
        double(peak_rss_bytes()) / (1 << 20));
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
