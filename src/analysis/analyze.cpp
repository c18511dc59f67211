// The analyze driver (DESIGN.md data flow): data -> tokenizer -> forward with capture hooks ->
// one input's attention/hidden states/values -> streaming accumulators -> tables, run.json,
// report.html. State is saved atomically every K inputs; --resume continues from it.
#include "sinkscope/analysis/analyze.hpp"
#include "sinkscope/analysis/inputs.hpp"

#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <iostream>

#include <torch/torch.h>

#include "sinkscope/analysis/lazy_attention.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/dataset.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/model/hooks.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/report/report.hpp"

namespace fs = std::filesystem;

namespace sinkscope::analysis {

namespace {

constexpr const char* kStateFile = "state.bin";
// State format 2: P2 stats count skipped inputs (10.r), P2 keeps each top key's first input
// (B.10), the head accumulator its per-layer-sink groups (10.d).
constexpr uint32_t kStateVersion = 2;

// What a run depends on: a resumed run must have exactly these.
nlohmann::json fingerprint(const AnalyzeOptions& o, const AnalysisInputs& inputs) {
    Sha256 h;
    h.update(inputs.images_sha256.data(), inputs.images_sha256.size());  // images: their files
    for (const auto& s : inputs.ids) {
        uint64_t n = s.size();
        h.update(&n, sizeof n);
        h.update(s.data(), s.size() * sizeof(int32_t));
    }
    std::vector<std::string> analyses = o.analyses;
    return {{"model", fs::absolute(o.m.model).string()},
            {"inputs_sha256", h.hex_digest()},
            {"analyses", analyses},
            {"compat", o.compat},
            {"sink", o.sink},
            {"min_parts", o.min_parts},
            {"scope", o.scope},
            {"device", o.m.device},
            {"dtype", o.m.dtype},
            {"bos", o.m.bos},
            {"per_head", o.per_head},
            {"symmetrize", o.symmetrize},
            {"topology_max_tokens", o.topology_max_tokens},
            {"attention_memory_mb", o.attention_memory_mb}};
}

// Host fp64 copy of a captured tensor of batch element 0.
std::vector<double> to_host(const at::Tensor& t) {
    at::Tensor c = t.select(0, 0).to(at::kCPU, at::kDouble).contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

struct Captured {
    std::unique_ptr<LazyAttention> lazy;  // long inputs: rows recomputed on demand
    metrics::AttentionInput attention;
    std::vector<std::vector<double>> hidden;  // [L + 1] x [T, d_model]
    std::vector<std::vector<double>> values;  // [L] x [H, T, d_head], GQA-expanded
};

// Whether one input's [L, H, T, T] pattern and scores (fp64) exceed the budget, so its rows are
// recomputed from rotated q and k instead of stored.
bool use_lazy_attention(const model::ModelConfig& cfg, int64_t n_tokens, int64_t budget_mb) {
    const double bytes = 2.0 * 8.0 * double(cfg.n_layers * cfg.n_heads) * double(n_tokens) *
                         double(n_tokens);
    return bytes > double(budget_mb) * 1024.0 * 1024.0;
}

Captured capture_input(const model::Model& m, const AnalysisInputs& inputs, size_t n,
                       bool want_value, bool lazy) {
    const std::vector<int32_t>& ids = inputs.ids[n];  // images: empty
    using model::HookPoint;
    const auto& cfg = m.config();
    std::vector<std::string> patterns;
    if (lazy) {
        patterns = {model::hook_glob(HookPoint::RotQ), model::hook_glob(HookPoint::RotK)};
    } else {
        patterns = {model::hook_glob(HookPoint::Pattern), model::hook_glob(HookPoint::AttnScores)};
    }
    if (want_value) {
        patterns.push_back(model::hook_glob(HookPoint::ResidPre));
        patterns.push_back(model::hook_name(HookPoint::ResidPost, cfg.n_layers - 1));
        patterns.push_back(model::hook_glob(HookPoint::V));
    }
    model::ForwardResult r = m.forward(inputs.model_input(m, n), model::CaptureSpec(patterns));
    r.logits.reset();  // not analysed here; [T, d_vocab] is the largest tensor of a long input
    Captured c;
    if (lazy) {
        c.lazy = std::make_unique<LazyAttention>(r, cfg);
        c.attention = c.lazy->input(ids);
    } else {
        c.attention = model::to_attention_input(r, cfg, ids);
    }
    if (want_value) {
        const int64_t T = inputs.n_tokens(n);
        // Each captured tensor is dropped once copied (peak memory of long inputs).
        auto take = [&r](const std::string& name) {
            std::vector<double> host = to_host(r.captured.at(name));
            r.captured.erase(name);
            return host;
        };
        for (int64_t l = 0; l < cfg.n_layers; ++l)
            c.hidden.push_back(take(model::hook_name(HookPoint::ResidPre, l)));
        c.hidden.push_back(take(model::hook_name(HookPoint::ResidPost, cfg.n_layers - 1)));
        const int64_t group = cfg.n_heads / cfg.n_kv_heads;
        for (int64_t l = 0; l < cfg.n_layers; ++l) {
            // hook_v: [batch, pos, n_kv_heads, d_head] -> [H, T, d_head] with head h reading kv h/group
            const std::vector<double> v = take(model::hook_name(HookPoint::V, l));
            std::vector<double> out(static_cast<size_t>(cfg.n_heads * T * cfg.d_head));
            for (int64_t h = 0; h < cfg.n_heads; ++h)
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t k = 0; k < cfg.d_head; ++k)
                        out[size_t((h * T + t) * cfg.d_head + k)] =
                            v[size_t((t * cfg.n_kv_heads + h / group) * cfg.d_head + k)];
            c.values.push_back(std::move(out));
        }
    }
    return c;
}

Progress::Mode progress_mode(const std::string& s) {
    if (s == "auto") return Progress::Mode::Auto;
    if (s == "always") return Progress::Mode::Always;
    if (s == "never") return Progress::Mode::Never;
    throw UsageError("--progress must be auto, always or never");
}

}  // namespace

void write_value_space(const metrics::ValueSpaceAccumulator& acc, const std::string& model_name,
                       const fs::path& dir) {
    io::Table t = io::make_long_table();
    const std::string mode = acc.options().compat ? "ruscio2025" : "principled";
    auto mean = [](double sum, int64_t n) { return n > 0 ? sum / double(n) : std::nan(""); };
    for (size_t l = 0; l < acc.layers().size(); ++l) {
        const auto& L = acc.layers()[l];
        const int64_t layer = int64_t(l);
        io::add_long_row(t, model_name, "", layer, -1, "reference_count", mode, mean(L.sum_reference_count, L.n_inputs));
        io::add_long_row(t, model_name, "", layer, -1, "relative_magnitude", "hidden", mean(L.sum_rel_magnitude_hidden, L.n_hidden));
        io::add_long_row(t, model_name, "", layer, -1, "directional_influence", "hidden", mean(L.sum_direction_hidden, L.n_hidden));
        io::add_long_row(t, model_name, "", layer, -1, "relative_magnitude", "value", mean(L.sum_rel_magnitude_value, L.n_value));
        io::add_long_row(t, model_name, "", layer, -1, "directional_influence", "value", mean(L.sum_direction_value, L.n_value));
        io::add_long_row(t, model_name, "", layer, -1, "transformation_magnitude", mode, mean(L.sum_transformation, L.n_transformation));
        io::add_long_row(t, model_name, "", layer, -1, "geometric_semantic_alignment", mode, mean(L.sum_alignment, L.n_alignment));
        io::add_long_row(t, model_name, "", layer, -1, "rows_without_visible_reference", mode, double(L.n_no_reference_visible));
    }
    t.write(dir, "value_space");
}

void run_analyze(const AnalyzeOptions& o, std::ostream& log) {
    // ---- options --------------------------------------------------------------------------
    if (o.max_tokens < 2) throw UsageError("--max-tokens must be >= 2");
    if (o.attention_memory_mb < 0) throw UsageError("--attention-memory-mb must be >= 0");
    if (o.samples < 0) throw UsageError("--samples must be >= 0");
    if (o.checkpoint_every < 1) throw UsageError("--checkpoint-every must be >= 1");
    if (!o.compat.empty() && o.compat != "ruscio2025")
        throw UsageError("--compat: unknown mode '" + o.compat + "' (known: ruscio2025)");
    const auto progress = progress_mode(o.progress);
    check_output_dir(o.out, o.overwrite);  // before the model loads: nothing of the user's is replaced
    // Buffers of long inputs (hidden states, values, row blocks: tens of MB each) come and go
    // once per input. glibc raises its mmap threshold after the first such free and then keeps
    // freed buffers in the heap, so peak RSS would carry every phase's buffers; a fixed
    // threshold returns them to the system when freed.
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    const auto bos = tokenizer::parse_bos_policy(o.m.bos);
    metrics::PipelineSelection selection = metrics::select_analyses(o.analyses, true);

    io::RunRecord record(o.command_line);
    const auto t0 = std::chrono::steady_clock::now();

    // ---- model and data ---------------------------------------------------------------------
    model::Model m = model::load_model(o.m.model, model::load_options(o.m));
    const auto& cfg = m.config();
    const AnalysisInputs inputs = load_analysis_inputs(m, o, bos);  // text ids or images
    const std::vector<std::vector<int32_t>>& ids = inputs.ids;
    const std::string& data_name = inputs.data_name;
    const int64_t n_truncated = inputs.n_truncated;

    // ---- accumulators, resumable staging ---------------------------------------------------------
    metrics::PipelineOptions popts;
    popts.analyses = o.analyses;
    popts.head.sink = metrics::parse_sink_policy(o.sink);
    popts.head.sink.bos_id = cfg.bos_token_id >= 0 ? cfg.bos_token_id
                             : m.tokenizer()      ? m.tokenizer()->bos_id()
                                                  : -1;
    popts.head.min_parts = o.min_parts;
    popts.head.scope = metrics::parse_scope(o.scope);
    popts.head.origin = o.m.model;
    popts.head_analyses = o.head;
    popts.p2.compat = o.compat;
    popts.p2.per_head = o.per_head;
    popts.p2.symmetrize = o.symmetrize;
    popts.p2.topology_max_tokens = o.topology_max_tokens;
    metrics::MetricsPipeline pipeline(cfg.n_layers, cfg.n_heads, popts, true);
    metrics::ValueSpaceOptions vopts;
    vopts.compat = !o.compat.empty();
    metrics::ValueSpaceAccumulator value(cfg.n_layers, vopts);

    const nlohmann::json print = fingerprint(o, inputs);
    OutputDir out = OutputDir::resumable(o.out, o.overwrite);
    const fs::path state_path = out.file(kStateFile);
    int64_t n_done = 0;
    if (fs::exists(state_path)) {
        out.keep_on_failure();  // never discard an interrupted run's state by accident
        if (!o.resume)
            throw UsageError(out.staging().string() +
                             " holds an interrupted run: pass --resume to continue it, or delete it");
        std::string bytes = read_file(state_path);
        BinaryReader r(bytes, state_path.string());
        r.expect_tag("sinkscope-analyze-state");
        if (r.get<uint32_t>() != kStateVersion) r.fail("written by another sinkscope version");
        if (r.get_string() != print.dump())
            throw UsageError("--resume: the interrupted run in " + out.staging().string() +
                             " used other inputs or options; delete it or repeat its command");
        n_done = r.get<int64_t>();
        pipeline.load(r);
        value.load(r);
        log << "resuming at input " << n_done << " of " << ids.size() << "\n";
        log.flush();
    }
    auto save_state = [&](int64_t done) {
        BinaryWriter w;
        w.tag("sinkscope-analyze-state");
        w.put<uint32_t>(kStateVersion);
        w.put_string(print.dump());
        w.put<int64_t>(done);
        pipeline.save(w);
        value.save(w);
        write_file_atomic(state_path, w.bytes());
        out.keep_on_failure();  // from now on an interruption leaves something to resume
    };
    if (n_done > 0) out.keep_on_failure();
    pipeline.open_sinks_file(out.file("sinks.csv"));

    // ---- stream the inputs ------------------------------------------------------------------------
    Progress bar("analyze", int64_t(ids.size()), progress);
    pipeline.set_progress(bar.stage_reporter());
    int64_t tokens = 0;
    for (int64_t n = 0; n < n_done; ++n) tokens += inputs.n_tokens(size_t(n));
    std::vector<std::string> pieces;
    metrics::Masking masking = metrics::Masking::Causal;
    for (int64_t n = n_done; n < int64_t(ids.size()); ++n) {
        const bool lazy =
            use_lazy_attention(cfg, inputs.n_tokens(size_t(n)), o.attention_memory_mb);
        bar.stage("forward", 0, 1);
        Captured c = capture_input(m, inputs, size_t(n), selection.value, lazy);
        masking = c.attention.masking;
        pieces.clear();
        if (m.tokenizer())
            for (int32_t id : ids[n]) pieces.push_back(m.tokenizer()->piece(id));
        // Value space first, so its hidden states and values are freed before the pipeline's
        // per-layer matrices are allocated (peak memory of long inputs).
        if (selection.value) {
            bar.stage("value space", 0, 1);
            value.add(c.attention, c.hidden, cfg.d_model, c.values, cfg.d_head);
        }
        c.hidden = {};
        c.values = {};
        pipeline.add(c.attention, m.tokenizer() ? &pieces : nullptr);
        tokens += inputs.n_tokens(size_t(n));
        bar.update(n + 1, tokens);
        if ((n + 1) % o.checkpoint_every == 0 && n + 1 < int64_t(ids.size())) save_state(n + 1);
        if (o.debug_kill_after > 0 && n + 1 == o.debug_kill_after) {
            std::fflush(nullptr);
            ::raise(SIGKILL);
        }
    }
    bar.finish();

    // ---- outputs ------------------------------------------------------------------------------
    const std::string model_name = fs::absolute(o.m.model).filename().string();
    nlohmann::json& rec = record.json();
    pipeline.write(out.staging(), model_name, rec, log);
    if (selection.value) write_value_space(value, model_name, out.staging());
    record.set_model_files(o.m.model, m.files);
    rec["model"]["architecture"] = cfg.architecture;
    rec["model"]["format"] = model::weight_format_name(m.format);
    rec["model"]["dims"] = {{"n_layers", cfg.n_layers}, {"n_heads", cfg.n_heads},
                            {"n_kv_heads", cfg.n_kv_heads}, {"d_model", cfg.d_model},
                            {"d_head", cfg.d_head}, {"d_vocab", cfg.d_vocab}};
    rec["subcommand"] = "analyze";
    rec["device"] = o.m.device;
    rec["dtype"] = o.m.dtype;
    rec["threads"] = o.m.threads;
    rec["tokenizer"] = m.tokenizer()     ? m.tokenizer()->kind()
                       : cfg.is_vision() ? "none (images)"
                                         : "none (token ids given)";
    rec["bos_policy"] = tokenizer::bos_policy_name(bos);
    rec["data"] = {{"source", data_name}, {"n_samples", ids.size()}, {"n_tokens", tokens},
                   {"max_tokens", o.max_tokens}, {"n_truncated", n_truncated}};
    rec["data"]["kind"] = inputs.kind;
    if (inputs.images) rec["data"]["images_sha256"] = inputs.images_sha256;
    else if (!o.data.empty()) rec["data"]["sha256"] = sha256_file(o.data);
    rec["sink_policy"] = {{"requested", o.sink},
                          {"resolved", metrics::to_string(metrics::resolve_auto(popts.head.sink, masking))},
                          {"positions_file", "sinks.csv"},
                          {"positions", pipeline.sink_positions()}};
    rec["compat"] = o.compat.empty() ? "none (principled)" : o.compat;
    rec["value_space"] = {{"variants", {"hidden (residual stream entering the layer)", "value (V projections, GQA-expanded)"}},
                          {"reference_threshold", vopts.reference_threshold},
                          {"fallback_fraction", vopts.fallback_fraction},
                          {"cap_fraction", vopts.cap_fraction}};
    int64_t n_recomputed = 0;
    for (size_t k = 0; k < inputs.size(); ++k)
        n_recomputed += use_lazy_attention(cfg, inputs.n_tokens(k), o.attention_memory_mb) ? 1 : 0;
    rec["attention_storage"] = {
        {"memory_mb", o.attention_memory_mb},
        {"rule", "inputs whose fp64 pattern + scores [L, H, T, T] exceed memory_mb have their rows "
                 "recomputed in blocks of " + std::to_string(LazyAttention::kRowsPerBlock) +
                 " from hook_rot_q/hook_rot_k (float32 scores and softmax, as the forward)"},
        {"recomputed_inputs", n_recomputed}};
    rec["resumed"] = n_done > 0;
    rec["checkpoint_every"] = o.checkpoint_every;
    fs::remove(state_path);
    record.write(out.staging());
    if (o.report) report::write_report(out.staging(), true);  // our own staging folder
    out.commit();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char line[200];
    std::snprintf(line, sizeof line, "analyzed %zu inputs (%lld tokens) in %.1f s; wrote %s\n",
                  ids.size(), (long long)tokens, secs, o.out.string().c_str());
    log << line;
}

}  // namespace sinkscope::analysis
