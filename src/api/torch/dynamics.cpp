// The dynamics driver (dynamics.hpp): manifest -> checks across the series -> one analyze run per
// checkpoint (staged under the dynamics folder, kept as each finishes) -> rows paired across
// checkpoints -> the exact entropy split (spec/METRICS.md section 6), trajectories over steps and
// report.html.
#include "sinkscope/api/dynamics.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/api/resumable.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/manifest.hpp"
#include "sinkscope/io/model_files.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/entropy_split.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/report/report.hpp"

namespace fs = std::filesystem;

namespace sinkscope::api {

namespace {

namespace t = analysis::tables;

constexpr const char* kStateFile = "dynamics_state.bin";
// State format 1: resumable.hpp's header line; the payload is empty (the finished checkpoints'
// folders are the progress, an interrupted one keeps its own analyze state).
constexpr StateFormat kState{"dynamics", 1};

// A folder name from a label: index first (keeps the manifest's order when listed), then the
// label with anything but [A-Za-z0-9._-] replaced.
std::string checkpoint_dir(size_t k, const std::string& label) {
    char index[24];  // room for any size_t (GCC checks the whole range)
    std::snprintf(index, sizeof index, "%03zu_", k);
    std::string s = index;
    for (char c : label.substr(0, 80))
        s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c
                                                                                             : '_';
    return s;
}

// Everything in one series must share architecture, shape and vocabulary, checked before any
// model runs.
void check_series(const std::vector<io::ManifestEntry>& entries, const std::string& manifest) {
    struct Seen {
        model::ModelConfig cfg;
        std::string tokenizer_sha;  // HF tokenizer file; empty when not a separate file
    };
    std::optional<Seen> first;
    for (const io::ManifestEntry& e : entries) {
        const io::ModelFiles files = io::locate_model(e.path);
        Seen s{model::read_model_config(files), {}};
        if (files.format == io::ModelFormat::HfDirectory && !files.tokenizer.empty())
            s.tokenizer_sha = sha256_file(files.tokenizer);
        if (!first) {
            first = std::move(s);
            continue;
        }
        const std::string who = "checkpoint " + quote(e.label) + " (" + e.path.string() + ")";
        const std::string ref = "checkpoint " + quote(entries[0].label);
        const model::ModelConfig& a = first->cfg;
        SS_CHECK_INPUT(s.cfg.architecture == a.architecture, manifest, who, " is ",
                       s.cfg.architecture, " but ", ref, " is ", a.architecture,
                       ": one series holds checkpoints of one architecture");
        SS_CHECK_INPUT(s.cfg.n_layers == a.n_layers && s.cfg.n_heads == a.n_heads, manifest, who,
                       " has ", s.cfg.n_layers, " layers x ", s.cfg.n_heads, " heads but ", ref,
                       " has ", a.n_layers, " x ", a.n_heads);
        SS_CHECK_INPUT(s.cfg.d_vocab == a.d_vocab, manifest, who, " has a vocabulary of ",
                       s.cfg.d_vocab, " but ", ref, " has ", a.d_vocab,
                       ": the inputs would not be the same tokens");
        SS_CHECK_INPUT(s.tokenizer_sha == first->tokenizer_sha, manifest, who,
                       " has another tokenizer than ", ref,
                       ": the inputs would not be the same tokens");
    }
}

namespace col = t::entropy_row;
namespace m = t::metric;

// One checkpoint's rows (entropy_rows.npy, [R, col::kCount], tables.hpp).
struct Rows {
    std::vector<double> v;
    int64_t n = 0;
    const double* row(int64_t r) const { return v.data() + r * col::kCount; }
};

Rows read_rows(const fs::path& dir) {
    const fs::path file = dir / t::kEntropyRowsFile;
    const io::NpyArray a = io::read_npy(file);
    SS_CHECK_INPUT(a.shape.size() == 2 && a.shape[1] == col::kCount, file.string(),
                   "expected shape (rows, " + std::to_string(col::kCount) + ")");
    return {a.to_f64(), a.shape[0]};
}

// Lexicographic order of (input, layer, head, query): the order the rows were written in.
int compare_key(const double* a, const double* b) {
    for (int c : {col::kInput, col::kLayer, col::kHead, col::kQuery})
        if (a[c] != b[c]) return a[c] < b[c] ? -1 : 1;
    return 0;
}

metrics::EntropyParts parts(const double* r) {
    return {r[col::kSinkMass], r[col::kContentMass], r[col::kContentEntropy], r[col::kEntropy]};
}

struct PairSplit {
    std::map<int64_t, metrics::EntropySplit> by_layer;  // -1: the model (every layer)
    int64_t unpaired = 0;  // rows present at one checkpoint only (the sink left the row)
};

// Rows are paired on (input, layer, head, query) by a merge of the two sorted lists.
PairSplit split_pair(const Rows& a, const Rows& b) {
    PairSplit out;
    int64_t i = 0, j = 0;
    while (i < a.n && j < b.n) {
        const int c = compare_key(a.row(i), b.row(j));
        if (c != 0) {
            ++out.unpaired;
            (c < 0 ? i : j) += 1;
            continue;
        }
        const auto pa = parts(a.row(i)), pb = parts(b.row(j));
        out.by_layer[int64_t(a.row(i)[col::kLayer])].add(pa, pb);
        out.by_layer[-1].add(pa, pb);
        ++i;
        ++j;
    }
    out.unpaired += (a.n - i) + (b.n - j);
    return out;
}

std::string text_cell(const io::Cell& c) {
    if (const auto* s = std::get_if<std::string>(&c)) return *s;
    if (const auto* d = std::get_if<double>(&c)) return format_number(*d);
    return std::to_string(std::get<int64_t>(c));
}
double number_cell(const io::Cell& c) {
    if (const auto* d = std::get_if<double>(&c)) return *d;
    if (const auto* i = std::get_if<int64_t>(&c)) return double(*i);
    return std::nan("");
}

// One row of a run's table, its cells by column name.
struct Row {
    const std::vector<io::Cell>& cells;
    const std::map<std::string, size_t>& columns;
    std::string text(const std::string& c) const { return text_cell(cells[columns.at(c)]); }
    double num(const std::string& c) const { return number_cell(cells[columns.at(c)]); }
    int64_t layer() const { return int64_t(num("layer")); }
};

// Calls `fn` on every row of <dir>/<file> when the run wrote that table (its analysis may be
// deselected); InputError naming the file when a column of `need` is missing.
void each_row(const fs::path& dir, const std::string& file, const std::vector<std::string>& need,
              const std::function<void(const Row&)>& fn) {
    const fs::path path = dir / file;
    if (!fs::exists(path)) return;
    const io::Table table = io::Table::read_csv(path);
    std::map<std::string, size_t> columns;
    for (size_t c = 0; c < table.columns().size(); ++c) columns[table.columns()[c]] = c;
    for (const auto& n : need)
        SS_CHECK_INPUT(columns.count(n), path.string(), "has no column ", quote(n));
    for (const auto& cells : table.rows()) fn(Row{cells, columns});
}

void dynamics(const DynamicsOptions& o, Communicator& comm, std::ostream& log);

}  // namespace

void run_dynamics(const DynamicsOptions& o, std::ostream& log) {
    resolve_dist(o.run.dist);  // a usage error before any connection
    with_communicator(o.run.dist, nullptr, [&](Communicator& comm) { dynamics(o, comm, log); });
}

namespace {

// Over several processes every checkpoint's analyze run is sharded the same way (analyze.cpp),
// over this one communicator; rank 0 alone writes the tables across checkpoints.
void dynamics(const DynamicsOptions& o, Communicator& comm, std::ostream& log) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string manifest = o.manifest.string();
    // ---- the series, checked whole before anything runs --------------------------------------
    const std::vector<io::ManifestEntry> entries = io::read_manifest(o.manifest);
    const AnalyzeOptions& base = o.run;

    // Every checkpoint keeps its rows' entropy parts (the split pairs them).
    AnalyzeOptions run = base;
    if (run.analysis.analyses.empty()) run.analysis.analyses = {"all"};
    if (std::find(run.analysis.analyses.begin(), run.analysis.analyses.end(), "entropy_rows") ==
        run.analysis.analyses.end())
        run.analysis.analyses.push_back("entropy_rows");
    run.report = o.checkpoint_reports;
    run.overwrite = false;  // the checkpoint folders live in our own staging folder
    run.communicator = &comm;
    // The entropy-collapse split and the trajectories read every layer of every checkpoint.
    if (!run.layers.empty() && run.layers != "all")
        throw UsageError("--layers is an option of analyze: dynamics analyses every layer");
    // The options are checked once, before the first model loads.
    {
        AnalyzeOptions first = run;
        first.m.model = entries[0].path.string();
        check_analyze_options(first);
    }
    const fs::path out_path = rank_output(base.out, comm.rank());
    check_output_dir(out_path, base.overwrite);
    check_series(entries, manifest);

    // The model column: the series' name, the folder holding the manifest (a training run).
    const std::string model_name = fs::absolute(o.manifest).parent_path().filename().string();
    run.model_name = model_name;

    io::RunRecord record(base.command_line, compute_threads(base.m));
    nlohmann::json series = nlohmann::json::array();
    for (size_t k = 0; k < entries.size(); ++k)
        series.push_back({{"label", entries[k].label},
                          {"step", entries[k].step ? nlohmann::json(*entries[k].step) : nullptr},
                          {"model", fs::absolute(entries[k].path).string()},
                          {"path", "checkpoints/" + checkpoint_dir(k, entries[k].label)}});
    nlohmann::json options = analysis::to_json(run.analysis);
    options.erase("threads");
    const nlohmann::json print = {
        {"checkpoints", series},
        {"data", base.data.empty() ? std::string() : fs::absolute(base.data).string()},
        {"max_tokens", base.max_tokens},
        {"samples", base.samples},
        {"options", options},
        {"device", base.m.device},
        {"dtype", base.m.dtype},
        {"bos", base.m.bos},
        {"rank", comm.rank()},
        {"world_size", comm.world_size()}};

    // Every rank runs the same series, data and options, or all refuse before anything is
    // written (each checkpoint's analyze run checks its model and token ids the same way).
    if (comm.distributed()) {
        nlohmann::json same = print;
        for (auto& c : same["checkpoints"]) c.erase("model");  // paths may differ between nodes
        same["data"] = base.data.empty() ? std::string() : sha256_file(base.data);
        comm.agree(same);
    }
    OutputDir out = OutputDir::resumable(out_path, base.overwrite);
    const fs::path state_path = out.file(kStateFile);
    if (std::optional<std::string> bytes = interrupted_state(out, state_path, base.resume, log))
        open_state(*bytes, state_path, kState, print, out);
    write_file_atomic(state_path, seal_state(kState, print, std::string()));

    // ---- one analyze run per checkpoint, one model in memory at a time ----------------------
    for (size_t k = 0; k < entries.size(); ++k) {
        const io::ManifestEntry& e = entries[k];
        const fs::path dir = out.staging() / series[k]["path"].get<std::string>();
        const std::string name = "checkpoint " + std::to_string(k + 1) + "/" +
                                 std::to_string(entries.size()) + " " + quote(e.label);
        // Rank 0's folders say which checkpoints are finished: every rank skips the same ones.
        if (comm.broadcast(is_sinkscope_run(dir) ? "1" : "0") == "1") {
            log << name << ": finished earlier, kept\n";
            out.keep_on_failure();
            continue;
        }
        AnalyzeOptions a = run;
        a.m.model = e.path.string();
        a.out = dir;
        a.checkpoint = e.label;
        a.resume = base.resume;
        a.after_input = nullptr;
        log << name << " (" << e.path.string() << ")\n";
        log.flush();
        // Each checkpoint's own summary is in its tables; the console gets its counts.
        std::ostringstream sub;
        const AnalyzeSummary done = run_analyze(a, sub);
        if (comm.rank() == 0) log << "  " << done.line() << "\n";
        out.keep_on_failure();  // from here an interruption leaves finished checkpoints to resume
        if (o.after_checkpoint) o.after_checkpoint(int64_t(k) + 1);
    }
    if (comm.rank() != 0) return end_rank(comm, out.staging());

    // ---- across checkpoints ------------------------------------------------------------------
    io::Table traj(t::kTrajectory.columns), frames(t::kFrameTypes.columns);
    // At most two checkpoints' rows are in memory at once (and the first one's, for the
    // first-to-last pair): memory does not grow with the length of the series.
    std::optional<Rows> previous, first;
    io::Table split(t::kEntropySplit.columns);
    double worst_residual = 0;
    auto cell_step = [&](size_t k) {
        return entries[k].step ? io::Cell(*entries[k].step) : io::Cell(std::string());
    };
    // The split of spec 6 between checkpoints a and b.
    auto add_split = [&](size_t a, size_t b, const Rows& ra, const Rows& rb, const char* kind) {
        const PairSplit s = split_pair(ra, rb);
        for (const auto& [l, x] : s.by_layer) {
            split.add_row({model_name, entries[a].label, entries[b].label, cell_step(a),
                           cell_step(b), std::string(kind), l, x.n_rows, x.sink_term,
                           x.content_term, x.delta_entropy, x.residual(), x.sink_share(),
                           s.unpaired});
            worst_residual = std::max(worst_residual, std::abs(x.residual()));
        }
    };
    for (size_t k = 0; k < entries.size(); ++k) {
        const fs::path dir = out.staging() / series[k]["path"].get<std::string>();
        const std::string label = entries[k].label;
        const io::Cell step = cell_step(k);
        auto add = [&](int64_t layer, int64_t head, const std::string& metric,
                       const std::string& param, double value) {
            traj.add_row({model_name, label, step, layer, head, metric, param, value});
        };
        // Entropy parts and sink mass, means over the rows of each layer and of the model.
        Rows rows = read_rows(dir);
        struct Mean {
            double s = 0, h = 0, hb = 0, wh = 0, hc = 0;
            int64_t n = 0;
        };
        std::map<int64_t, Mean> means;
        for (int64_t r = 0; r < rows.n; ++r) {
            const double* x = rows.row(r);
            const double s = x[col::kSinkMass], c = x[col::kContentMass];
            const double hb = -(s > 0 ? s * std::log(s) : 0) - (c > 0 ? c * std::log(c) : 0);
            for (int64_t l : {int64_t(x[col::kLayer]), int64_t(-1)}) {
                Mean& mean = means[l];
                mean.s += s;
                mean.h += x[col::kEntropy];
                mean.hb += hb;
                mean.wh += c * x[col::kContentEntropy];
                mean.hc += x[col::kContentEntropy];
                ++mean.n;
            }
        }
        for (const auto& [l, mean] : means) {
            const double n = double(std::max<int64_t>(mean.n, 1));
            add(l, -1, m::kSinkMass, "", mean.s / n);
            add(l, -1, m::kEntropy, "", mean.h / n);
            add(l, -1, m::kBinarySinkEntropy, "", mean.hb / n);
            add(l, -1, m::kContentEntropyWeighted, "", mean.wh / n);
            add(l, -1, m::kContentEntropy, "", mean.hc / n);
        }
        // Sink_eps per layer and for the model; flip rates and rho; head-averaged spectra.
        each_row(dir, t::kSinkEps.file(), {"layer", "metric", "convention", "value"},
                 [&](const Row& r) {
                     if (r.text("metric") == m::kSinkEps)
                         add(r.layer(), -1, m::kSinkEps, r.text("convention"), r.num("value"));
                 });
        each_row(dir, std::string(t::kReversal) + ".csv", {"layer", "comparison", "metric", "rate"},
                 [&](const Row& r) {
                     if (r.text("comparison") == "flip")
                         add(r.layer(), -1, "flip_rate", r.text("metric"), r.num("rate"));
                 });
        each_row(dir, std::string(t::kRegime) + ".csv", {"layer", "rho"},
                 [&](const Row& r) { add(r.layer(), -1, "rho", "", r.num("rho")); });
        each_row(dir, std::string(t::kSpectra) + ".csv", {"layer", "head", "metric", "value"},
                 [&](const Row& r) {
                     if (r.num("head") == -1)
                         add(r.layer(), -1, r.text("metric"), "spectra", r.num("value"));
                 });
        if (fs::exists(dir / t::kFrameFile)) {
            const std::string file = (dir / t::kFrameFile).string();
            const nlohmann::json f = io::read_json_file(dir / t::kFrameFile);
            frames.add_row({model_name, label, step, io::json_string(f, "verdict", file),
                            io::json_number_or(f, "share_first_mid_late", std::nan(""), file),
                            io::json_number_or(f, "mean_reference_count", std::nan(""), file)});
        }
        // The split with the checkpoint before (spec 6), then this one becomes "before".
        if (previous) add_split(k - 1, k, *previous, rows, "consecutive");
        if (k == 0 && entries.size() > 2) first = rows;
        if (k + 1 == entries.size() && first) add_split(0, k, *first, rows, "first_last");
        previous = std::move(rows);
    }
    previous.reset();
    first.reset();

    // ---- outputs ------------------------------------------------------------------------------
    traj.write(out.staging(), t::kTrajectory.name, false);
    frames.write(out.staging(), t::kFrameTypes.name, false);
    split.write(out.staging(), t::kEntropySplit.name, false);
    nlohmann::json& rec = record.json();
    rec["subcommand"] = "dynamics";
    rec["manifest"] = fs::absolute(o.manifest).string();
    rec["checkpoints"] = series;
    rec["options"] = analysis::to_json(run.analysis);
    rec["options"]["threads"] = compute_threads(base.m);  // --threads resolved, as analyze uses it
    rec["data"] = base.data.empty() ? nlohmann::json("built-in prompts") : print["data"];
    rec["entropy_split"] = {
        {"definition",
         "per row H = H_b(s) + (1 - s) H(pi); sink term = [H_b(s1) - H_b(s0)] + (s0 - s1) "
         "(H(pi0) + H(pi1)) / 2, content term = (1 - (s0 + s1) / 2) (H(pi1) - H(pi0)), summed "
         "over the rows present at both checkpoints"},
        {"max_abs_residual", io::json_number(worst_residual)}};
    rec["resumed"] = base.resume;
    rec["distributed"] = {{"world_size", comm.world_size()},
                          {"sharding", "every checkpoint's inputs as analyze shards them"}};
    fs::remove(state_path);
    record.write(out.staging());
    if (base.report) report::write_report(out.staging(), true);
    out.commit();
    comm.finish();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char took[32];
    std::snprintf(took, sizeof took, "%.1f", secs);
    log << "dynamics over " << entries.size() << " checkpoints in " << took
        << " s; largest |sink + content - measured entropy change| "
        << format_number(worst_residual) << " nats; wrote " << base.out.string() << "\n";
}

}  // namespace

}  // namespace sinkscope::api
