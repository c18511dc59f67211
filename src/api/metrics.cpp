// The `sinkscope metrics` command: attention file -> analysis pipeline -> tables and run.json.
#include "sinkscope/api/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <ostream>
#include <sstream>

#include "sinkscope/analysis/attention_file.hpp"
#include "sinkscope/analysis/pipeline.hpp"
#include "sinkscope/api/run_outputs.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/report/report.hpp"

namespace sinkscope::api {

using metrics::Masking;
using metrics::SinkPolicy;

namespace {

// splitmix64 + Box-Muller: the example is the same on every platform and standard library.
struct ExampleRng {
    uint64_t state;
    uint64_t next() { return splitmix64(state); }
    double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }
    double normal() {
        const double u = uniform(), v = uniform();
        return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
    }
};

void check_options(const MetricsCommandOptions& o) {
    if (o.out.empty()) throw UsageError("--out is required");
    if (o.arrays && (o.example || !o.attention.empty() || !o.scores.empty() || !o.lengths.empty() ||
                     !o.token_ids.empty() || !o.tokens.empty()))
        throw InternalError("metrics: in-memory arrays and input files together");
    if (!o.arrays && o.example == !o.attention.empty())
        throw UsageError(o.example ? "--example and --attention exclude each other"
                                   : "give --attention FILE.npy (or --example)");
    if (o.example && (!o.scores.empty() || !o.lengths.empty() || !o.token_ids.empty()))
        throw UsageError("--example generates its own input: drop --scores/--lengths/--token-ids");
    if (o.window < 0) throw UsageError("--window must be >= 0");
}

nlohmann::json file_record(const std::filesystem::path& p, const std::string& role) {
    return {{"role", role}, {"path", p.string()}, {"sha256", sha256_file(p)}};
}

}  // namespace

io::NpyArray make_example_attention() {
    const int64_t n_inputs = 8, n_layers = 4, n_heads = 4, t = 16;
    std::vector<float> a(static_cast<size_t>(n_inputs * n_layers * n_heads * t * t), 0.0f);
    ExampleRng rng{20260129};
    std::vector<double> z(static_cast<size_t>(t));  // [T] logits of one row
    size_t at = 0;
    for (int64_t n = 0; n < n_inputs; ++n)
        for (int64_t l = 0; l < n_layers; ++l)
            for (int64_t h = 0; h < n_heads; ++h) {
                // later layers sink harder; heads differ in temperature and sink strength
                const double sink = 1.0 + 1.2 * double(l) + 0.6 * double(h);
                const double temperature = 0.6 + 0.3 * double((h + l) % 4);
                for (int64_t i = 0; i < t; ++i, at += size_t(t)) {
                    double z_max = -INFINITY, norm = 0;
                    for (int64_t j = 0; j <= i; ++j) {
                        z[j] = temperature * rng.normal() + (j == 0 ? sink : 0.0);
                        z_max = std::max(z_max, z[j]);
                    }
                    for (int64_t j = 0; j <= i; ++j) norm += std::exp(z[j] - z_max);
                    for (int64_t j = 0; j <= i; ++j)
                        a[at + size_t(j)] = static_cast<float>(std::exp(z[j] - z_max) / norm);
                }
            }
    return io::make_npy_f32({n_inputs, n_layers, n_heads, t, t}, a);
}

namespace {

// The one code path of the command and the bindings: the inputs' sink policy checked, then every
// input streamed through the pipeline, the streamed tables written into `stream_dir` (the staging
// folder, or memory).
struct PipelineRun {
    MetricsRun run;
    nlohmann::json sink_positions;
    SinkPolicy resolved_policy;
};
PipelineRun run_pipeline(const analysis::AttentionFile& file,
                         const std::vector<std::vector<std::string>>& token_strings,
                         const analysis::ResolvedOptions& resolved, const std::string& model,
                         const RunFiles& stream_dir, Progress::Mode mode,
                         const std::function<void(int64_t)>& after_input) {
    const SingleThreadedBlas blas;  // the analyses' own threads split the work
    PipelineRun out;
    out.resolved_policy = metrics::resolve_auto(resolved.head.sink, file.masking());
    if (out.resolved_policy.kind == SinkPolicy::Kind::Position &&
        out.resolved_policy.position >= file.n_tokens())
        throw UsageError("--sink " + std::to_string(out.resolved_policy.position) +
                         " is beyond the " + std::to_string(file.n_tokens()) +
                         " key positions of the inputs");
    if (!token_strings.empty() && int64_t(token_strings.size()) != file.n_inputs())
        throw InputError("tokens", "has " + std::to_string(token_strings.size()) +
                                       " lists of tokens for " + std::to_string(file.n_inputs()) +
                                       " inputs");
    analysis::AnalysisPipeline pipeline(file.n_layers(), file.n_heads(), resolved, model,
                                        file.attention().origin());
    pipeline.open_streams(stream_dir);
    metrics::AttentionInput x;
    Progress progress("metrics", file.n_inputs(), mode);
    pipeline.set_progress(progress.stage_reporter());
    for (int64_t n = 0; n < file.n_inputs(); ++n) {
        file.load(n, x);
        pipeline.add(x, token_strings.empty() ? nullptr : &token_strings[size_t(n)]);
        progress.update(n + 1, (n + 1) * file.n_tokens());
        if (after_input) after_input(n + 1);
    }
    progress.finish();
    out.run.results = pipeline.finish();
    out.sink_positions = pipeline.sink_positions();
    return out;
}

void check_bos(const analysis::ResolvedOptions& resolved, const analysis::AnalysisOptions& o,
               bool have_token_ids) {
    if (resolved.head.sink.kind == SinkPolicy::Kind::Bos && (o.bos_id < 0 || !have_token_ids))
        throw UsageError("--sink bos needs --token-ids FILE.npy and --bos-id ID");
}

}  // namespace

MetricsRun compute_metrics(analysis::AttentionArrays arrays,
                           std::vector<std::vector<std::string>> token_strings,
                           const analysis::AnalysisOptions& options, const std::string& name,
                           const std::function<void(int64_t)>& after_input) {
    const analysis::ResolvedOptions resolved =
        analysis::resolve(options, {.hidden_states = false, .source = "attention array"});
    check_bos(resolved, options, arrays.token_ids != nullptr);
    const analysis::AttentionFile file(std::move(arrays));
    // The streamed tables (sinks, per-input values) are collected in memory, then read as their
    // files would be (the same cells as the command's CSV files).
    const RunFiles streams = RunFiles::in_memory();
    PipelineRun p = run_pipeline(file, token_strings, resolved, name, streams,
                                 Progress::Mode::Never, after_input);
    for (const auto& [path, text] : streams.files())
        if (path.size() > 4 && path.compare(path.size() - 4, 4, ".csv") == 0)
            p.run.streams.emplace_back(path.substr(0, path.size() - 4),
                                       io::Table::parse_csv(text, streams.shown(path)));
    std::sort(p.run.streams.begin(), p.run.streams.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return std::move(p.run);
}

namespace {

// The file options of the inputs (the example is written into the output folder first, then
// read back like any dump, so the recorded numbers are exactly those of attention.npy).
analysis::AttentionFileOptions file_options(const MetricsCommandOptions& o, OutputDir& out) {
    analysis::AttentionFileOptions f;
    f.attention = o.attention;
    if (o.example) {
        f.attention = out.file("attention.npy");
        io::write_npy(f.attention, make_example_attention());
    }
    f.scores = o.scores;
    f.lengths = o.lengths;
    f.token_ids = o.token_ids;
    f.window = o.window;
    f.masking = analysis::parse_masking(o.masking);
    return f;
}

// Token strings for token specialisation (section 8): those given, then one JSON array of
// strings per line of --tokens, one line per input.
std::vector<std::vector<std::string>> read_token_strings(const MetricsCommandOptions& o,
                                                         int64_t n_inputs) {
    std::vector<std::vector<std::string>> token_strings = o.token_strings;
    if (o.tokens.empty()) return token_strings;
    const std::string text = read_file_limited(o.tokens, Limit::DataBytes);
    size_t pos = 0, line = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        ++line;
        std::string l = text.substr(pos, end - pos);
        pos = end + 1;
        if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
        check_limit(o.tokens.string(), Limit::LineBytes, "line " + std::to_string(line) + ": bytes",
                    l.size());
        const nlohmann::json j = io::parse_json(l, o.tokens.string());
        if (!j.is_array() ||
            !std::all_of(j.begin(), j.end(), [](const auto& v) { return v.is_string(); }))
            throw InputError(o.tokens.string(),
                             "line " + std::to_string(line) + " is not a JSON array of strings");
        token_strings.push_back(j.get<std::vector<std::string>>());
    }
    if (int64_t(token_strings.size()) != n_inputs)
        throw InputError(o.tokens.string(), "has " + std::to_string(token_strings.size()) +
                                                " lines of tokens for " + std::to_string(n_inputs) +
                                                " inputs");
    return token_strings;
}

// run.json's fields of a metrics run (spec 9 fields that apply).
void record_metrics_run(io::RunRecord& record, const MetricsCommandOptions& o,
                        const analysis::AttentionFile& file, const std::filesystem::path& attention,
                        const analysis::ResolvedOptions& resolved, const PipelineRun& p) {
    nlohmann::json inputs = nlohmann::json::array();
    if (o.arrays)
        inputs.push_back({{"role", "attention"}, {"path", file.attention().origin()}});
    else
        inputs.push_back(file_record(attention, "attention"));
    if (o.example) inputs.back()["path"] = "attention.npy (generated by --example)";
    if (!o.scores.empty()) inputs.push_back(file_record(o.scores, "scores"));
    if (!o.lengths.empty()) inputs.push_back(file_record(o.lengths, "lengths"));
    if (!o.token_ids.empty()) inputs.push_back(file_record(o.token_ids, "token_ids"));
    if (!o.tokens.empty()) inputs.push_back(file_record(o.tokens, "tokens"));
    record.set("subcommand", "metrics");
    record.set("inputs", inputs);
    record.set("attention_dtype", io::dtype_descr(file.attention().dtype()));
    record.set("shape", {{"n_inputs", file.n_inputs()},
                         {"n_layers", file.n_layers()},
                         {"n_heads", file.n_heads()},
                         {"n_tokens", file.n_tokens()}});
    record.set("masking", {{"rule", file.masking() == Masking::Causal ? "causal" : "bidirectional"},
                           {"auto_detected", file.masking_detected()},
                           {"window", o.window},
                           {"lengths", o.lengths.empty() ? "all T" : o.lengths.string()}});
    record.set("quantities_from",
               o.scores.empty() ? "probabilities (closed rows)" : "scores (fp64 log-softmax)");
    record.set("sink_policy", {{"requested", metrics::to_string(resolved.head.sink)},
                               {"resolved", metrics::to_string(p.resolved_policy)},
                               {"positions_file", "sinks.csv"},
                               {"positions", p.sink_positions}});
    record.set("threads", resolved.threads);
    record.set("options", analysis::to_json(o.analysis));
}

// The console's first line: the inputs' shape and the conventions they ran under.
std::string describe_inputs(const analysis::AttentionFile& file, const SinkPolicy& sink,
                            const metrics::ZeroPolicy& zeros) {
    return "sinkscope metrics: " + count_of(file.n_inputs(), "input") + " x " +
           count_of(file.n_layers(), "layer") + " x " + count_of(file.n_heads(), "head") + " x " +
           count_of(file.n_tokens(), "token") + " (" +
           (file.masking() == Masking::Causal ? "causal" : "bidirectional") +
           (file.masking_detected() ? ", detected" : "") + "), sink " + metrics::to_string(sink) +
           ", zeros " + metrics::to_string(zeros) + "\n";
}

}  // namespace

MetricsRun run_metrics_command(const MetricsCommandOptions& o, std::ostream& log) {
    check_options(o);
    const analysis::ResolvedOptions resolved =
        analysis::resolve(o.analysis, {.hidden_states = false, .source = "attention file"});
    check_bos(resolved, o.analysis,
              o.arrays ? o.arrays->token_ids != nullptr : !o.token_ids.empty());

    io::RunRecord record(o.command_line, resolved.threads);
    OutputDir out(o.out, o.overwrite);

    // Pass 1: open and validate the inputs' shapes.
    const analysis::AttentionFileOptions options = file_options(o, out);
    std::unique_ptr<analysis::AttentionFile> opened;
    if (o.arrays) {
        o.arrays->masking = options.masking;
        o.arrays->window = o.window;
        opened = std::make_unique<analysis::AttentionFile>(std::move(*o.arrays));
    } else {
        opened = std::make_unique<analysis::AttentionFile>(options);
    }
    const analysis::AttentionFile& file = *opened;
    const std::vector<std::vector<std::string>> token_strings =
        read_token_strings(o, file.n_inputs());

    // Pass 2: stream the inputs through the shared pipeline (the same code as `analyze`).
    const std::string model = !o.name.empty() ? o.name
                              : o.example     ? "example"
                                              : o.attention.stem().string();
    PipelineRun p = run_pipeline(file, token_strings, resolved, model, RunFiles(out.staging()),
                                 o.progress, o.after_input);
    const analysis::PipelineResults& results = p.run.results;

    // Pass 3: tables, summaries and the run.json fields of every analysis.
    write_outputs(results, RunFiles(out.staging()));
    record.json().update(results.record);
    for (const auto& w : results.warnings) std::cerr << "sinkscope: warning: " << w << "\n";
    record_metrics_run(record, o, file, options.attention, resolved, p);
    record.write(out.staging());
    // Like analyze; a build without the Vega runtime still writes every table (the metrics must
    // work without the report's dependencies), and says why the page is missing.
    const bool report = o.report && report::have_vega_runtime();
    const bool reported = report && !report::write_report_if_any(out.staging()).empty();
    out.commit();
    if (report && !reported) log << report::kNoFigureNote;
    if (o.report && !report)
        log << "report.html not written: this build has no Vega runtime "
               "(scripts/install-deps.sh); `sinkscope report --run DIR` writes it later\n";

    log << describe_inputs(file, p.resolved_policy, resolved.head.zeros) << results.summary;
    log << "wrote " << o.out.string() << (o.example ? " (with the example as attention.npy)" : "")
        << "\n";
    return std::move(p.run);
}

}  // namespace sinkscope::api
