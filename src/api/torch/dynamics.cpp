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
#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/run_values.hpp"
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

Rows read_rows(const RunFiles& dir) {
    const io::NpyArray a = io::read_npy(dir, t::kEntropyRowsFile);
    SS_CHECK_INPUT(a.shape.size() == 2 && a.shape[1] == col::kCount, dir.shown(t::kEntropyRowsFile),
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

void dynamics(const DynamicsOptions& o, Communicator& comm, std::ostream& log);

}  // namespace

void run_dynamics(const DynamicsOptions& o, std::ostream& log) {
    resolve_dist(o.run.dist);  // a usage error before any connection
    with_communicator(o.run.dist, nullptr, [&](Communicator& comm) { dynamics(o, comm, log); });
}

namespace {

// Over several processes every checkpoint's analyze run is sharded the same way (analyze.cpp),
// over this one communicator; rank 0 alone writes the tables across checkpoints. The steps: the
// series and options checked (prepare), the staged output folder (open_output), one analyze run
// per checkpoint (run_checkpoints), the tables across checkpoints (across) and run.json (write).
class DynamicsRun {
public:
    DynamicsRun(const DynamicsOptions& o, Communicator& comm, std::ostream& log)
        : o_(o), base_(o.run), comm_(comm), log_(log) {}

    void run() {
        prepare();
        open_output();
        {
            const EachNoteOnce once;  // a note every checkpoint repeats (inputs cut) said once
            run_checkpoints();
        }
        if (comm_.rank() != 0) return out_ ? end_rank(comm_, out_->staging()) : comm_.finish();
        across();
        write();
    }

private:
    void prepare();
    void open_output();
    void run_checkpoints();
    void across();
    void add_trajectory(size_t k, const RunFiles& dir);
    // Checkpoint k's analyze run folder.
    RunFiles checkpoint_files(size_t k) const {
        return files_->sub(series_[k]["path"].get<std::string>());
    }
    void write();

    const DynamicsOptions& o_;
    const AnalyzeOptions& base_;
    Communicator& comm_;
    std::ostream& log_;
    const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
    std::vector<io::ManifestEntry> entries_;
    AnalyzeOptions run_;  // each checkpoint's analyze options, but its model and folder
    std::string model_name_;
    std::optional<io::RunRecord> record_;
    nlohmann::json series_, print_;
    std::optional<OutputDir> out_;   // on disk only
    std::optional<RunFiles> files_;  // the staging folder's, or base_.memory
    fs::path state_path_;
    // across()
    io::Table traj_{t::kTrajectory.columns}, frames_{t::kFrameTypes.columns},
        split_{t::kEntropySplit.columns};
    double worst_residual_ = 0;
};

// The series and the options, checked whole before anything runs.
void DynamicsRun::prepare() {
    const std::string manifest = o_.manifest.string();
    entries_ = io::read_manifest(o_.manifest);
    // Every checkpoint keeps its rows' entropy parts (the split pairs them).
    run_ = base_;
    if (run_.analysis.analyses.empty()) run_.analysis.analyses = {"all"};
    if (std::find(run_.analysis.analyses.begin(), run_.analysis.analyses.end(), "entropy_rows") ==
        run_.analysis.analyses.end())
        run_.analysis.analyses.push_back("entropy_rows");
    run_.report = o_.checkpoint_reports;
    run_.overwrite = false;  // the checkpoint folders live in our own staging folder
    run_.communicator = &comm_;
    // The entropy-collapse split and the trajectories read every layer of every checkpoint.
    if (!run_.layers.empty() && run_.layers != "all")
        throw UsageError("--layers is an option of analyze: dynamics analyses every layer");
    // The options are checked once, before the first model loads.
    {
        AnalyzeOptions first = run_;
        first.m.model = entries_[0].path.string();
        check_analyze_options(first);
    }
    if (base_.memory && base_.resume)
        throw UsageError(
            "--resume continues a run in its output folder: a run in memory keeps "
            "no saved state");
    if (!base_.memory) check_output_dir(rank_output(base_.out, comm_.rank()), base_.overwrite);
    check_series(entries_, manifest);

    // The model column: the series' name, the folder holding the manifest (a training run).
    model_name_ = fs::absolute(o_.manifest).parent_path().filename().string();
    run_.model_name = model_name_;

    record_.emplace(base_.command_line, compute_threads(base_.m));
    series_ = nlohmann::json::array();
    for (size_t k = 0; k < entries_.size(); ++k)
        series_.push_back({{"label", entries_[k].label},
                           {"step", entries_[k].step ? nlohmann::json(*entries_[k].step) : nullptr},
                           {"model", fs::absolute(entries_[k].path).string()},
                           {"path", "checkpoints/" + checkpoint_dir(k, entries_[k].label)}});
    nlohmann::json options = analysis::to_json(run_.analysis);
    options.erase("threads");
    print_ = {{"checkpoints", series_},
              {"data", base_.data.empty() ? std::string() : fs::absolute(base_.data).string()},
              {"max_tokens", base_.max_tokens},
              {"samples", base_.samples},
              {"options", options},
              {"device", base_.m.device},
              {"dtype", base_.m.dtype},
              {"bos", base_.m.bos},
              {"rank", comm_.rank()},
              {"world_size", comm_.world_size()}};

    // Every rank runs the same series, data and options, or all refuse before anything is
    // written (each checkpoint's analyze run checks its model and token ids the same way).
    if (comm_.distributed()) {
        nlohmann::json same = print_;
        for (auto& c : same["checkpoints"]) c.erase("model");  // paths may differ between nodes
        same["data"] = base_.data.empty() ? std::string() : sha256_file(base_.data);
        comm_.agree(same);
    }
}

void DynamicsRun::open_output() {
    if (base_.memory) {
        files_ = *base_.memory;
        return;
    }
    out_.emplace(OutputDir::resumable(rank_output(base_.out, comm_.rank()), base_.overwrite));
    state_path_ = out_->file(kStateFile);
    if (std::optional<std::string> bytes =
            interrupted_state(*out_, state_path_, base_.resume, log_))
        open_state(*bytes, state_path_, kState, print_, *out_);
    write_file_atomic(state_path_, seal_state(kState, print_, std::string()));
    files_ = RunFiles(out_->staging());
}

// One analyze run per checkpoint, one model in memory at a time.
void DynamicsRun::run_checkpoints() {
    for (size_t k = 0; k < entries_.size(); ++k) {
        const io::ManifestEntry& e = entries_[k];
        const RunFiles dir = checkpoint_files(k);
        const std::string name = "checkpoint " + std::to_string(k + 1) + "/" +
                                 std::to_string(entries_.size()) + " " + quote(e.label);
        // Rank 0's folders say which checkpoints are finished: every rank skips the same ones.
        const bool finished = out_ && is_sinkscope_run(dir.dir());
        if (comm_.broadcast(finished ? "1" : "0") == "1") {
            log_ << name << ": finished earlier, kept\n";
            out_->keep_on_failure();
            continue;
        }
        AnalyzeOptions a = run_;
        a.m.model = e.path.string();
        if (dir.is_memory())
            a.memory = dir;
        else
            a.out = dir.dir();
        a.checkpoint = e.label;
        a.resume = base_.resume;
        a.after_input = nullptr;
        log_ << name << " (" << e.path.string() << ")\n";
        log_.flush();
        // Each checkpoint's own summary is in its tables; the console gets its counts.
        std::ostringstream sub;
        const AnalyzeSummary done = run_analyze(a, sub);
        if (comm_.rank() == 0) log_ << "  " << done.line() << "\n";
        if (out_) out_->keep_on_failure();  // from here an interruption leaves finished ones
        if (o_.after_checkpoint) o_.after_checkpoint(int64_t(k) + 1);
    }
}

// The tables across checkpoints: each checkpoint's trajectory values and frame type, and the
// entropy split of spec 6 between consecutive checkpoints and between the first and the last.
void DynamicsRun::across() {
    // At most two checkpoints' rows are in memory at once (and the first one's, for the
    // first-to-last pair): memory does not grow with the length of the series.
    std::optional<Rows> previous, first;
    auto cell_step = [&](size_t k) {
        return entries_[k].step ? io::Cell(*entries_[k].step) : io::Cell(std::string());
    };
    // The split of spec 6 between checkpoints a and b.
    auto add_split = [&](size_t a, size_t b, const Rows& ra, const Rows& rb, const char* kind) {
        const PairSplit s = split_pair(ra, rb);
        for (const auto& [l, x] : s.by_layer) {
            split_.add_row({model_name_, entries_[a].label, entries_[b].label, cell_step(a),
                            cell_step(b), std::string(kind), l, x.n_rows, x.sink_term,
                            x.content_term, x.delta_entropy, x.residual(), x.sink_share(),
                            s.unpaired});
            worst_residual_ = std::max(worst_residual_, std::abs(x.residual()));
        }
    };
    for (size_t k = 0; k < entries_.size(); ++k) {
        const RunFiles dir = checkpoint_files(k);
        Rows rows = read_rows(dir);
        add_trajectory(k, dir);
        if (dir.exists(t::kFrameFile)) {
            const std::string file = dir.shown(t::kFrameFile);
            const nlohmann::json f = io::parse_json(dir.read(t::kFrameFile), file);
            frames_.add_row({model_name_, entries_[k].label, cell_step(k),
                             io::json_string(f, "verdict", file),
                             io::json_number_or(f, "share_first_mid_late", std::nan(""), file),
                             io::json_number_or(f, "mean_reference_count", std::nan(""), file)});
        }
        // The split with the checkpoint before (spec 6), then this one becomes "before".
        if (previous) add_split(k - 1, k, *previous, rows, "consecutive");
        if (k == 0 && entries_.size() > 2) first = rows;
        if (k + 1 == entries_.size() && first) add_split(0, k, *first, rows, "first_last");
        previous = std::move(rows);
    }
}

// Checkpoint k's rows of trajectory.csv: the entropy parts and sink mass (means over the rows of
// each layer and of the model), Sink_eps, flip rates, rho and the head-averaged spectra.
void DynamicsRun::add_trajectory(size_t k, const RunFiles& dir) {
    const io::Cell step = entries_[k].step ? io::Cell(*entries_[k].step) : io::Cell(std::string());
    std::vector<analysis::RunValue> values;
    for (const analysis::AnalysisInfo& info : analysis::registry())
        if (info.trajectory_values) info.trajectory_values(dir, values);
    for (const analysis::RunValue& v : values)
        traj_.add_row({model_name_, entries_[k].label, step, v.layer, int64_t(-1), v.metric,
                       v.param, v.value});
}

// The tables, run.json and the report, committed.
void DynamicsRun::write() {
    traj_.write(*files_, t::kTrajectory.name, false);
    frames_.write(*files_, t::kFrameTypes.name, false);
    split_.write(*files_, t::kEntropySplit.name, false);
    nlohmann::json& rec = record_->json();
    rec["subcommand"] = "dynamics";
    rec["manifest"] = fs::absolute(o_.manifest).string();
    rec["checkpoints"] = series_;
    rec["options"] = analysis::to_json(run_.analysis);
    rec["options"]["threads"] = compute_threads(base_.m);  // --threads resolved, as analyze
    rec["data"] = base_.data.empty() ? nlohmann::json("built-in prompts") : print_["data"];
    rec["entropy_split"] = {
        {"definition",
         "per row H = H_b(s) + (1 - s) H(pi); sink term = [H_b(s1) - H_b(s0)] + (s0 - s1) "
         "(H(pi0) + H(pi1)) / 2, content term = (1 - (s0 + s1) / 2) (H(pi1) - H(pi0)), summed "
         "over the rows present at both checkpoints"},
        {"max_abs_residual", io::json_number(worst_residual_)}};
    rec["resumed"] = base_.resume;
    rec["distributed"] = {{"world_size", comm_.world_size()},
                          {"sharding", "every checkpoint's inputs as analyze shards them"}};
    record_->write(*files_);
    if (out_) {
        fs::remove(state_path_);
        if (base_.report) report::write_report(out_->staging(), true);
        out_->commit();
    }
    comm_.finish();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    char took[32];
    std::snprintf(took, sizeof took, "%.1f", secs);
    log_ << "dynamics over " << count_of(int64_t(entries_.size()), "checkpoint") << " in " << took
         << " s; largest |sink + content - measured entropy change| "
         << console_number(worst_residual_) << " nats"
         << (out_ ? "; wrote " + base_.out.string() : std::string()) << "\n";
}

void dynamics(const DynamicsOptions& o, Communicator& comm, std::ostream& log) {
    DynamicsRun(o, comm, log).run();
}

}  // namespace

}  // namespace sinkscope::api
