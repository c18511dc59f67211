// The `sinkscope metrics` command: attention file -> head accumulators -> tables and run.json.
#include "sinkscope/metrics/command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/attention_file.hpp"
#include "sinkscope/metrics/head.hpp"

namespace sinkscope::metrics {

const std::vector<std::string>& known_analyses() {
    // Other analyses (reversal, clustering, P2 ...) register here when they land.
    static const std::vector<std::string> names = {"compositional"};
    return names;
}

namespace {

// splitmix64 + Box-Muller: the example is the same on every platform and standard library.
struct ExampleRng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }
    double normal() {
        const double u = uniform(), v = uniform();
        return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
    }
};

void check_options(const MetricsCommandOptions& o) {
    if (o.out.empty()) throw UsageError("--out is required");
    if (o.example == !o.attention.empty())
        throw UsageError(o.example ? "--example and --attention exclude each other"
                                   : "give --attention FILE.npy (or --example)");
    if (o.example && (!o.scores.empty() || !o.lengths.empty() || !o.token_ids.empty()))
        throw UsageError("--example generates its own input: drop --scores/--lengths/--token-ids");
    for (const auto& a : o.analyses)
        if (std::find(known_analyses().begin(), known_analyses().end(), a) ==
            known_analyses().end())
            throw UsageError("--analyses: unknown analysis '" + a + "' (available: compositional)");
    if (o.masking != "auto" && o.masking != "causal" && o.masking != "bidirectional")
        throw UsageError("masking must be auto, causal or bidirectional");
    if (o.min_parts < 2) throw UsageError("--min-parts must be >= 2 (spec 10.p)");
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

void run_metrics_command(const MetricsCommandOptions& o, std::ostream& log) {
    check_options(o);
    HeadOptions head_options;
    head_options.sink = parse_sink_policy(o.sink);
    head_options.sink.bos_id = o.bos_id;
    if (head_options.sink.kind == SinkPolicy::Kind::Bos && (o.bos_id < 0 || o.token_ids.empty()))
        throw UsageError("--sink bos needs --token-ids FILE.npy and --bos-id ID");
    head_options.zeros = parse_zero_policy(o.zeros);
    head_options.min_parts = o.min_parts;
    head_options.scope = parse_scope(o.scope);
    if (o.threads < 0) throw UsageError("--threads must be >= 0");
    head_options.n_threads = resolved_threads(o.threads);

    io::RunRecord record(o.command_line);
    OutputDir out(o.out);

    // Pass 1: open and validate the inputs' shapes (the example is written first, then read
    // back like any dump, so the recorded numbers are exactly those of attention.npy).
    AttentionFileOptions file_options;
    file_options.attention = o.attention;
    if (o.example) {
        file_options.attention = out.file("attention.npy");
        io::write_npy(file_options.attention, make_example_attention());
    }
    file_options.scores = o.scores;
    file_options.lengths = o.lengths;
    file_options.token_ids = o.token_ids;
    file_options.window = o.window;
    if (o.masking == "causal") file_options.masking = Masking::Causal;
    if (o.masking == "bidirectional") file_options.masking = Masking::Bidirectional;
    AttentionFile file(file_options);
    const std::string origin = o.example ? std::string("attention.npy") : o.attention.string();
    head_options.origin = file.attention().origin();
    const SinkPolicy resolved_policy = resolve_auto(head_options.sink, file.masking());
    if (resolved_policy.kind == SinkPolicy::Kind::Position &&
        resolved_policy.position >= file.n_tokens())
        throw UsageError("--sink " + std::to_string(resolved_policy.position) + " is beyond the " +
                         std::to_string(file.n_tokens()) + " key positions of the inputs");

    // Pass 2: stream the inputs through the accumulators.
    HeadAccumulator acc(file.n_layers(), file.n_heads(), head_options);
    // sinks.csv is streamed (layer -1 = the model-wide sink) so memory stays independent of N.
    std::ofstream sinks(out.file("sinks.csv"));
    sinks << "input,layer,sink_position\n";
    nlohmann::json sink_json = nlohmann::json::array();
    AttentionInput x;
    Progress progress("metrics", file.n_inputs());
    for (int64_t n = 0; n < file.n_inputs(); ++n) {
        file.load(n, x);
        SinkPositions s = acc.add(x, n);
        progress.update(n + 1, (n + 1) * file.n_tokens());
        sinks << n << ",-1," << s.model << "\n";
        for (int64_t l = 0; l < file.n_layers(); ++l)
            sinks << n << "," << l << "," << s.per_layer[l] << "\n";
        if (file.n_inputs() <= 1000)
            sink_json.push_back({{"model", s.model}, {"per_layer", s.per_layer}});
    }
    progress.finish();
    const HeadResults r = acc.finish();

    // Pass 3: tables.
    const std::string model = o.example ? "example" : o.attention.stem().string();
    io::Table heads = io::make_long_table();
    for (size_t k = 0; k < r.heads.size(); ++k) {
        const auto& m = r.means[k];
        const int64_t l = r.heads[k].layer, h = r.heads[k].head;
        io::add_long_row(heads, model, "", l, h, "sink_mass", "", m.sink_mass);
        io::add_long_row(heads, model, "", l, h, "sink_balance", "", m.sink_balance);
        io::add_long_row(heads, model, "", l, h, "entropy", "", m.entropy);
        io::add_long_row(heads, model, "", l, h, "binary_sink_entropy", "", m.binary_sink_entropy);
        io::add_long_row(heads, model, "", l, h, "content_entropy", "", m.content_entropy);
        io::add_long_row(heads, model, "", l, h, "n_rows", "", double(m.n_rows));
    }
    heads.write(out.staging(), "heads");

    std::filesystem::create_directories(out.file("distances"));
    io::Table dist({"distance", "layer_a", "head_a", "layer_b", "head_b", "value"});
    for (const char* name : kDistanceNames) {
        const Eigen::MatrixXd& m = r.distances.at(name);
        const int64_t n = m.rows();
        std::vector<double> values(static_cast<size_t>(n * n));
        for (int64_t a = 0; a < n; ++a)
            for (int64_t b = 0; b < n; ++b) values[size_t(a * n + b)] = m(a, b);
        io::write_npy(out.file("distances") / (std::string(name) + ".npy"),
                      io::make_npy_f64({n, n}, values));
        for (int64_t a = 0; a < n; ++a)
            for (int64_t b = a + 1; b < n; ++b)
                if (!std::isnan(m(a, b)))
                    dist.add_row({std::string(name), r.heads[a].layer, r.heads[a].head,
                                  r.heads[b].layer, r.heads[b].head, m(a, b)});
    }
    dist.write(out.staging(), "distances", false);

    io::Table disp({"scope", "layer", "c_perp", "v_b", "rho", "n_rows"});
    for (const auto& d : r.layers)
        disp.add_row({std::string("layer"), d.layer, d.c_perp, d.v_b, d.rho, d.n_rows});
    disp.add_row({std::string("model"), int64_t(-1), r.model.c_perp, r.model.v_b, r.model.rho,
                  r.model.n_rows});
    disp.write(out.staging(), "dispersion");
    sinks.close();
    if (!sinks) throw IoError(out.file("sinks.csv").string(), "write failed");

    // run.json (spec 9 fields that apply).
    nlohmann::json inputs = nlohmann::json::array();
    inputs.push_back(file_record(file_options.attention, "attention"));
    if (o.example) inputs.back()["path"] = "attention.npy (generated by --example)";
    if (!o.scores.empty()) inputs.push_back(file_record(o.scores, "scores"));
    if (!o.lengths.empty()) inputs.push_back(file_record(o.lengths, "lengths"));
    if (!o.token_ids.empty()) inputs.push_back(file_record(o.token_ids, "token_ids"));
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
    record.set("quantities_from", o.scores.empty() ? "probabilities (closed rows, spec 10.a)"
                                                   : "scores (fp64 log-softmax, spec 10.b)");
    record.set("sink_policy", {{"requested", to_string(head_options.sink)},
                               {"resolved", to_string(resolved_policy)},
                               {"positions_file", "sinks.csv"},
                               {"positions", sink_json}});
    record.set("zero_policy", to_string(head_options.zeros));
    record.set("min_parts", o.min_parts);
    record.set("scope", to_string(head_options.scope));
    record.set("analyses", o.analyses);
    record.set("threads", head_options.n_threads);
    record.set("aggregation", {{"aitchison", "root mean square over rows"},
                               {"classical", "arithmetic mean over rows"},
                               {"js_units", "nats"},
                               {"dispersion_variance", "population (ddof 0)"}});
    const auto& c = r.counts;
    record.set("counts", {{"n_inputs", c.n_inputs},
                          {"rows_total", c.rows_total},
                          {"rows_used", c.rows_used},
                          {"rows_excluded", c.rows_excluded},
                          {"sink_not_visible", c.sink_not_visible},
                          {"rows_used_model", c.rows_used_model},
                          {"sink_not_visible_model", c.sink_not_visible_model}});
    record.set("model_rho", io::json_number(r.model.rho));
    record.write(out.staging());
    out.commit();

    // Summary.
    char line[256];
    std::snprintf(line, sizeof line,
                  "sinkscope metrics: %lld inputs x %lld layers x %lld heads x %lld tokens (%s%s), "
                  "sink %s, zeros %s\n",
                  (long long)file.n_inputs(), (long long)file.n_layers(), (long long)file.n_heads(),
                  (long long)file.n_tokens(),
                  file.masking() == Masking::Causal ? "causal" : "bidirectional",
                  file.masking_detected() ? ", detected" : "", to_string(resolved_policy).c_str(),
                  to_string(head_options.zeros).c_str());
    log << line;
    std::snprintf(line, sizeof line,
                  "rows: %lld total, %lld used, %lld excluded (D < %lld), %lld sink not visible\n",
                  (long long)c.rows_total, (long long)c.rows_used, (long long)c.rows_excluded,
                  (long long)o.min_parts, (long long)c.sink_not_visible);
    log << line;
    for (const auto& d : r.layers) {
        std::snprintf(line, sizeof line, "  layer %-3lld C_perp %-10.4g V_b %-10.4g rho %.3f\n",
                      (long long)d.layer, d.c_perp, d.v_b, d.rho);
        log << line;
    }
    std::snprintf(line, sizeof line, "  model     C_perp %-10.4g V_b %-10.4g rho %.3f\n",
                  r.model.c_perp, r.model.v_b, r.model.rho);
    log << line;
    log << "wrote " << o.out.string()
        << ": heads.csv, distances.csv, distances/*.npy, dispersion.csv, sinks.csv, run.json"
        << (o.example ? ", attention.npy" : "") << "\n";
}

}  // namespace sinkscope::metrics
