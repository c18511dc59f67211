// The prune driver (spec section 5): calibration data -> head distance matrices (the same head
// analysis and defaults as `analyze`) -> greedy removal order per channel -> the pruned model
// scored on held-out evaluation data (next-token perplexity for decoders, masked-LM
// pseudo-perplexity for encoders, top-1 agreement with the unpruned model for ViT), for every
// (channel, sparsity), the unpruned model and random pruning with several seeds. Every evaluated
// point is saved in the staging folder, so --resume continues an interrupted run with identical
// tables.
#include "sinkscope/api/prune.hpp"
#include "sinkscope/api/resumable.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include <ATen/ATen.h>

#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/parallel.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/pruning.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/report/report.hpp"

#include "command_start.hpp"

namespace fs = std::filesystem;

namespace sinkscope::api {

namespace {

// resumable.hpp's checked header line, then {"points": [{value, mean_nll, n_scored}, ...]}, the
// evaluated points in the order of the run's points.
constexpr const char* kStateFile = "prune_state.json";
constexpr StateFormat kState{"prune", 2};
// Per-input attention above this many MB is recomputed row by row (as analyze's default).
constexpr int64_t kAttentionMemoryMb = 1024;

using Channel = metrics::PruneChannel;

std::vector<Channel> parse_channels(const std::string& s) {
    std::vector<Channel> out;
    std::set<std::string> seen;
    for (const std::string& name : split_list(s)) {
        const Channel* found = metrics::find_prune_channel(name);
        if (!found)
            throw UsageError("--channels: unknown channel '" + name +
                             "' (known: " + metrics::prune_channel_names() + ")");
        if (seen.insert(name).second) out.push_back(*found);
    }
    if (out.empty()) throw UsageError("--channels names no channel");
    return out;
}

std::vector<double> parse_sparsities(const std::string& s) {
    std::vector<double> out;
    for (const std::string& item : split_list(s)) {
        size_t used = 0;
        double v = std::nan("");
        try {
            v = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size() || !(v > 0.0 && v < 1.0))
            throw UsageError("--sparsity: '" + item +
                             "' is not a fraction strictly between 0 and 1");
        out.push_back(v);
    }
    if (out.empty()) throw UsageError("--sparsity names no value");
    return out;
}

std::string ids_sha256(const std::vector<std::vector<int32_t>>& ids) {
    Sha256 h;
    for (const auto& s : ids) {
        uint64_t n = s.size();
        h.update(&n, sizeof n);
        h.update(s.data(), s.size() * sizeof(int32_t));
    }
    return h.hex_digest();
}

// One evaluated point of the experiment.
struct Point {
    std::string method;  // "none" (unpruned), a channel name, or "random"
    int64_t seed = -1;   // random only
    double sparsity = 0;
    std::vector<int64_t> heads;  // pruned, as layer * n_heads + head
    // Results (filled when evaluated): the measure's value, the mean NLL behind a perplexity
    // (NaN for top-1 agreement), and the tokens (or images) it was computed on.
    bool done = false;
    double value = 0, mean_nll = 0;
    int64_t n_scored = 0;
};

// The evaluated points among points[first, end), in order: the state file's list, and what a rank
// hands to rank 0.
nlohmann::json points_json(const std::vector<Point>& points, size_t first, size_t end) {
    nlohmann::json done = nlohmann::json::array();
    for (size_t i = first; i < end; ++i) {
        const Point& p = points[i];
        if (p.done)
            done.push_back({{"value", p.value},
                            {"mean_nll", std::isnan(p.mean_nll) ? nlohmann::json(nullptr)
                                                                : nlohmann::json(p.mean_nll)},
                            {"n_scored", p.n_scored}});
    }
    return done;
}

// Reads points_json()'s list `done` (from `origin`) into points[first, ...); returns its length.
size_t read_points(const nlohmann::json& done, std::vector<Point>& points, size_t first, size_t end,
                   const std::string& origin) {
    SS_CHECK_INPUT(done.is_array() && done.size() <= end - first, origin,
                   "holds no list of points, or more points than this run has");
    for (size_t i = 0; i < done.size(); ++i) {
        const nlohmann::json& d = done[i];
        const bool ok = d.is_object() && d.contains("value") && d["value"].is_number() &&
                        d.contains("mean_nll") &&
                        (d["mean_nll"].is_number() || d["mean_nll"].is_null()) &&
                        d.contains("n_scored") && d["n_scored"].is_number_unsigned();
        SS_CHECK_INPUT(ok, origin, "point ", i, " is not {value, mean_nll, n_scored}");
        Point& p = points[first + i];
        p.done = true;
        p.value = d["value"].get<double>();
        p.mean_nll = d["mean_nll"].is_null() ? std::nan("") : d["mean_nll"].get<double>();
        p.n_scored = d["n_scored"].get<int64_t>();
    }
    return done.size();
}

std::string head_list(const std::vector<int64_t>& heads, int64_t n_heads) {
    std::string s;
    for (int64_t h : heads) {
        if (!s.empty()) s += ' ';
        s += std::to_string(h / n_heads);
        s += '.';
        s += std::to_string(h % n_heads);
    }
    return s;
}

std::string prune(const PruneOptions& o, Communicator& comm, std::ostream& log);

}  // namespace

std::string run_prune(const PruneOptions& o, std::ostream& log) {
    resolve_dist(o.dist);  // a usage error before any connection
    return with_communicator(o.dist, nullptr,
                             [&](Communicator& comm) { return prune(o, comm, log); });
}

namespace {

// One rank's prune run, step by step: the options (check), the model and the two data sets
// (load), the experiment's points (plan_points), the staged folder and any saved points
// (open_output), calibration and the removal orders (calibrate), this rank's points scored
// (evaluate), the points gathered at rank 0 (merge_shards), and the tables, run.json and report
// (write).
class PruneRun {
public:
    PruneRun(const PruneOptions& o, Communicator& comm, std::ostream& log)
        : o_(o), comm_(comm), log_(log) {}

    std::string run() {
        check();
        load();
        plan_points();
        open_output();
        calibrate();
        evaluate();
        if (!merge_shards()) return {};
        return write();
    }

private:
    void check();
    void load();
    void check_held_out() const;
    void plan_points();
    void open_output();
    void calibrate();
    void evaluate();
    void score(const model::HeadMask* mask, Point& p) const;
    std::vector<int64_t> top1(const model::HeadMask* mask) const;
    bool merge_shards();
    std::string write();
    io::Table random_table() const;
    void record(nlohmann::json& rec) const;
    bool per_layer() const { return o_.budget == "per-layer"; }
    std::string summary(const io::Table& random) const;

    void save_state() {
        if (!out_) return;  // in memory: no state
        write_file_atomic(
            state_path_,
            seal_state(kState, fingerprint_,
                       nlohmann::json{{"points", points_json(points_, first_, end_)}}.dump()));
        out_->keep_on_failure();  // from now on an interruption leaves something to resume
    }
    const model::ModelConfig& cfg() const { return m_->config(); }

    const PruneOptions& o_;
    Communicator& comm_;
    std::ostream& log_;
    std::vector<Channel> channels_;
    std::vector<double> sparsities_;
    CommandStart start_;
    std::optional<io::RunRecord> record_;
    std::optional<model::Model> m_;
    std::string measure_;
    std::vector<int64_t> counts_;        // heads pruned per sparsity
    std::vector<int64_t> layer_counts_;  // per-layer budget: heads pruned in each layer
    std::optional<analysis::AnalysisInputs> calib_, eval_;
    std::vector<Point> points_;
    nlohmann::json fingerprint_;
    size_t first_ = 0, end_ = 0;     // this rank's points
    std::optional<OutputDir> out_;   // on disk only
    std::optional<RunFiles> files_;  // the staging folder's, or o_.memory
    fs::path state_path_;
    metrics::HeadOptions hopts_;
    int64_t rows_used_ = 0;           // calibration rows of the head distances
    metrics::Dispersion dispersion_;  // the calibration set's model-wide V_b, C_perp, rho
    model::HeadMask::Kind kind_ = model::HeadMask::Kind::Zero;
    at::Tensor z_mean_;
    io::Table order_table_{analysis::tables::kPruneOrder.columns};
    std::vector<int64_t> reference_;  // vision: the unpruned model's top-1 labels
};

// The options, before anything is loaded.
void PruneRun::check() {
    if (o_.calib.empty()) throw UsageError("--calib is required");
    if (o_.eval.empty()) throw UsageError("--eval is required");
    if (o_.out.empty() && !o_.memory) throw UsageError("--out is required");
    if (o_.memory && o_.resume)
        throw UsageError(
            "--resume continues a run in its output folder: a run in memory keeps "
            "no saved state");
    channels_ = parse_channels(o_.channels);
    sparsities_ = parse_sparsities(o_.sparsity);
    if (o_.ablation != "zero" && o_.ablation != "mean")
        throw UsageError("--ablation must be zero or mean");
    if (o_.budget != "model" && o_.budget != "per-layer")
        throw UsageError("--budget must be model or per-layer, got '" + printable(o_.budget, 40) +
                         "'");
    if (o_.random_seeds < 0 || o_.random_seeds > 1000)
        throw UsageError("--random-seeds must be between 0 and 1000");
    analysis::check_loss_max_tokens(o_.max_tokens);
    if (o_.calib_samples < 0 || o_.eval_samples < 0)
        throw UsageError("--calib-samples and --eval-samples must be >= 0");
    start_ = start_command(o_.m, o_.progress, o_.out, o_.overwrite, comm_.rank(), !o_.memory);
    record_.emplace(o_.command_line, compute_threads(o_.m));
}

// The model, the heads each sparsity prunes, and the calibration and evaluation data.
void PruneRun::load() {
    m_.emplace(model::load_model(o_.m.model, load_options(o_.m)));
    record_->set_model_files(o_.m.model, m_->files);  // hashed in the background
    // What a pruned model is scored by: next-token perplexity (decoders), masked-LM
    // pseudo-perplexity (encoders) or top-1 agreement with the unpruned model (vision).
    measure_ = cfg().is_vision() ? "top1_agreement"
               : cfg().causal    ? "perplexity"
                                 : "pseudo_perplexity";
    const int64_t n_heads_total = cfg().n_layers * cfg().n_heads;
    for (double s : sparsities_) {
        try {
            if (per_layer()) {
                layer_counts_.push_back(metrics::heads_to_prune(s, cfg().n_heads));
                counts_.push_back(layer_counts_.back() * cfg().n_layers);
            } else {
                counts_.push_back(metrics::heads_to_prune(s, n_heads_total));
            }
        } catch (const UsageError& e) {
            throw UsageError(std::string("--sparsity: ") + e.what() +
                             (per_layer() ? " (--budget per-layer: of each layer's heads)" : ""));
        }
    }
    // The first `samples` samples (0: all) of a data file, cut to --max-tokens.
    auto load = [&](const std::string& data, int64_t samples) {
        return analysis::load_inputs(*m_,
                                     {.data = data,
                                      .text_column = o_.text_column,
                                      .max_tokens = o_.max_tokens,
                                      .over_context = start_.over_context,
                                      .samples = samples,
                                      .seed = std::nullopt},
                                     start_.bos);
    };
    calib_.emplace(load(o_.calib, o_.calib_samples));
    eval_.emplace(load(o_.eval, o_.eval_samples));
    if (!calib_->truncation_note().empty()) print_note("--calib: " + calib_->truncation_note());
    if (!eval_->truncation_note().empty()) print_note("--eval: " + eval_->truncation_note());
    print_warning(calib_->samples_note("--calib-samples"));
    print_warning(eval_->samples_note("--eval-samples"));
    check_held_out();
}

// Section 5: calibration rows and evaluation text are disjoint, and something can be scored.
void PruneRun::check_held_out() const {
    // An input's identity: its token ids, or for images the bytes of its preprocessed pixels.
    auto identity = [&](const analysis::AnalysisInputs& in, size_t k) {
        if (!cfg().is_vision()) return ids_sha256({in.ids[k]});
        const at::Tensor px = in.model_input(*m_, k).pixel_values.to(at::kCPU).contiguous();
        Sha256 h;
        h.update(px.data_ptr(), size_t(px.numel()) * px.element_size());
        return h.hex_digest();
    };
    std::set<std::string> calib_set;
    for (size_t k = 0; k < calib_->size(); ++k) calib_set.insert(identity(*calib_, k));
    for (size_t k = 0; k < eval_->size(); ++k)
        if (calib_set.count(identity(*eval_, k)))
            throw UsageError("--calib and --eval overlap: evaluation sample " +
                             std::to_string(eval_->sample_index[k] + 1) + " of " + o_.eval +
                             " is also a calibration sample (the evaluation must be held out)");
    bool scorable = cfg().is_vision() && eval_->size() > 0;
    for (const auto& ids : eval_->ids) scorable = scorable || ids.size() >= 2;
    if (!scorable)
        throw UsageError("--eval " + o_.eval + " has no sample of 2 or more tokens to score");
}

// The experiment's points: the unpruned model, each channel at each sparsity (its heads come
// after calibration) and the random prunings, known now; this rank's shard of them.
void PruneRun::plan_points() {
    auto add_point = [&](std::string method, int64_t seed, double sparsity,
                         std::vector<int64_t> heads) {
        Point p;
        p.method = std::move(method);
        p.seed = seed;
        p.sparsity = sparsity;
        p.heads = std::move(heads);
        points_.push_back(std::move(p));
    };
    add_point("none", -1, 0.0, {});
    for (const Channel& c : channels_)
        for (double s : sparsities_) add_point(c.name, -1, s, {});
    const int64_t n_heads_total = cfg().n_layers * cfg().n_heads, H = cfg().n_heads;
    for (int64_t r = 0; r < o_.random_seeds; ++r)
        for (size_t i = 0; i < sparsities_.size(); ++i) {
            const uint64_t seed = o_.seed + uint64_t(r);
            if (!per_layer()) {
                add_point("random", int64_t(seed), sparsities_[i],
                          metrics::random_prune(n_heads_total, counts_[i], seed));
                continue;
            }
            // The same number in every layer, each layer's heads drawn with its own stream.
            std::vector<int64_t> heads;
            for (int64_t l = 0; l < cfg().n_layers; ++l)
                for (int64_t h : metrics::random_prune(
                         H, layer_counts_[i], seed ^ (uint64_t(l + 1) * 0x9E3779B97F4A7C15ull)))
                    heads.push_back(l * H + h);
            add_point("random", int64_t(seed), sparsities_[i], std::move(heads));
        }
    // This rank evaluates the contiguous shard [first, end) of the points (every rank calibrates:
    // the removal orders are needed for its points).
    const auto [first, end] =
        shard_range(int64_t(points_.size()), comm_.rank(), comm_.world_size());
    first_ = size_t(first), end_ = size_t(end);
}

// The fingerprint and the ranks' agreement, the staged folder and any points saved before.
void PruneRun::open_output() {
    fingerprint_ = {{"model", fs::absolute(o_.m.model).string()},
                    {"calib_sha256", ids_sha256(calib_->ids)},
                    {"eval_sha256", ids_sha256(eval_->ids)},
                    {"channels", o_.channels},
                    {"sparsity", o_.sparsity},
                    {"ablation", o_.ablation},
                    {"budget", o_.budget},
                    {"random_seeds", o_.random_seeds},
                    {"seed", o_.seed},
                    {"device", o_.m.device},
                    {"dtype", o_.m.dtype},
                    {"bos", o_.m.bos},
                    {"measure", measure_},
                    {"rank", comm_.rank()},
                    {"world_size", comm_.world_size()}};
    // Every rank runs the same model (whatever path it has there), data and options, or all
    // refuse before anything is written.
    if (comm_.distributed()) {
        nlohmann::json same = fingerprint_;
        same["model"] = model_identity(o_.m.model, m_->files);
        comm_.agree(same);
    }
    if (o_.memory) {
        files_ = *o_.memory;
        return;
    }
    out_.emplace(OutputDir::resumable(start_.out, o_.overwrite));
    files_ = RunFiles(out_->staging());
    state_path_ = out_->file(kStateFile);
    if (std::optional<std::string> bytes = interrupted_state(*out_, state_path_, o_.resume, log_)) {
        const std::string file = state_path_.string();
        const nlohmann::json state =
            io::parse_json(open_state(*bytes, state_path_, kState, fingerprint_, *out_), file);
        const size_t n = read_points(
            state.is_object() ? state.value("points", nlohmann::json()) : nlohmann::json(), points_,
            first_, end_, file);
        log_ << "resuming at point " << first_ + n + 1 << " of " << points_.size() << "\n";
    }
}

// Calibration: head distances (model scope) and, for mean ablation, mean z; then each channel's
// removal order and the heads of its points.
void PruneRun::calibrate() {
    analysis::AnalysisOptions aopts;
    aopts.threads = o_.m.threads;
    analysis::ResolvedOptions resolved =
        analysis::resolve(aopts, {.hidden_states = true, .source = o_.m.model});
    hopts_ = resolved.head;
    hopts_.scope = metrics::Scope::Model;
    if (hopts_.sink.bos_id < 0) hopts_.sink.bos_id = model_bos_id(*m_);
    metrics::HeadAccumulator acc(cfg().n_layers, cfg().n_heads, hopts_);
    {
        Progress bar("prune: calibration", int64_t(calib_->size()), start_.progress);
        int64_t tokens = 0;
        // Forwards of several inputs at once, added in input order (core/parallel.hpp).
        const int64_t n_calib = int64_t(calib_->size());
        const int64_t at_once = analysis::inputs_at_once(
            cfg(), *calib_, 0, n_calib, int(resolved.threads), kAttentionMemoryMb, {});
        ordered_parallel(
            n_calib, int(at_once), at_once,
            [&](int64_t n) {
                const model::ForwardWorkers share(model::forward_share(std::min(at_once, n_calib)));
                const bool lazy = analysis::use_lazy_attention(cfg(), calib_->n_tokens(size_t(n)),
                                                               kAttentionMemoryMb);
                return analysis::capture_input(*m_, *calib_, size_t(n), {}, lazy);
            },
            [&](int64_t n, analysis::Captured c) {
                acc.add(c.attention, n);
                tokens += calib_->n_tokens(size_t(n));
                bar.update(n + 1, tokens);
            });
        bar.finish();
    }
    const metrics::HeadResults heads = acc.finish();
    rows_used_ = heads.counts.rows_used_model;
    dispersion_ = heads.model;
    kind_ = o_.ablation == "mean" ? model::HeadMask::Kind::Mean : model::HeadMask::Kind::Zero;
    if (kind_ == model::HeadMask::Kind::Mean) z_mean_ = model::compute_mean_z(*m_, calib_->ids);

    const int64_t H = cfg().n_heads;
    // The removal order of every channel: model-wide, or within each layer (per-layer budget,
    // its heads' distances to each other only); steps count within the order.
    const std::vector<int64_t>& budget = per_layer() ? layer_counts_ : counts_;
    const int64_t k_max = *std::max_element(budget.begin(), budget.end());
    for (const Channel& c : channels_) {
        const Eigen::MatrixXd& d = heads.distances.at(c.matrix);
        std::vector<std::vector<metrics::PruneStep>> orders;  // [group] steps, heads model-wide
        if (!per_layer()) {
            orders.push_back(metrics::greedy_prune_order(d, k_max));
        } else {
            for (int64_t l = 0; l < cfg().n_layers; ++l) {
                auto order = metrics::greedy_prune_order(d.block(l * H, l * H, H, H), k_max);
                for (auto& step : order) step.head += l * H;
                orders.push_back(std::move(order));
            }
        }
        for (const auto& order : orders)
            for (size_t s = 0; s < order.size(); ++s)
                order_table_.add_row({std::string(c.name), int64_t(s + 1), order[s].head / H,
                                      order[s].head % H, order[s].redundancy});
        for (Point& p : points_)
            if (p.method == c.name) {
                const size_t i =
                    size_t(std::find(sparsities_.begin(), sparsities_.end(), p.sparsity) -
                           sparsities_.begin());
                for (const auto& order : orders)
                    for (int64_t s = 0; s < budget[i]; ++s)
                        p.heads.push_back(order[size_t(s)].head);
            }
    }
}

// Vision: the top-1 label of every evaluation image under `mask`.
std::vector<int64_t> PruneRun::top1(const model::HeadMask* mask) const {
    std::vector<int64_t> labels;
    for (size_t k = 0; k < eval_->size(); ++k)
        labels.push_back(
            m_->forward(eval_->model_input(*m_, k), {}, mask).logits[0].argmax().item<int64_t>());
    return labels;
}

// Point p's measure with `mask` (null: the unpruned model).
void PruneRun::score(const model::HeadMask* mask, Point& p) const {
    if (cfg().is_vision()) {
        const std::vector<int64_t> labels = top1(mask);
        int64_t same = 0;
        for (size_t k = 0; k < labels.size(); ++k) same += labels[k] == reference_[k];
        p.value = double(same) / double(labels.size());
        p.mean_nll = std::nan("");
        p.n_scored = int64_t(labels.size());
        return;
    }
    const model::MaskedLmOptions mlm{.rate = 0.15, .seed = o_.seed};
    const model::PerplexityResult r =
        cfg().causal ? model::compute_perplexity(*m_, eval_->ids, mask)
                     : model::compute_masked_perplexity(*m_, eval_->ids, mlm, mask);
    p.value = r.perplexity;
    p.mean_nll = r.mean_nll;
    p.n_scored = r.n_tokens;
}

// This rank's points not evaluated yet, each saved as it finishes.
void PruneRun::evaluate() {
    // Vision: the unpruned model's top-1 label of every evaluation image is the reference.
    if (cfg().is_vision()) reference_ = top1(nullptr);
    Progress bar("prune: evaluation", int64_t(end_ - first_), start_.progress);
    int64_t n_done = 0;
    for (size_t i = first_; i < end_; ++i) {
        Point& p = points_[i];
        if (!p.done) {
            model::HeadMask mask(kind_, cfg().n_layers, cfg().n_heads);
            mask.z_mean = z_mean_;
            for (int64_t h : p.heads) mask.ablate(h / cfg().n_heads, h % cfg().n_heads);
            score(p.heads.empty() ? nullptr : &mask, p);
            p.done = true;
            save_state();
        }
        ++n_done;
        bar.update(n_done, 0);
        if (o_.after_point) o_.after_point(n_done);
    }
    bar.finish();
}

// Every rank's evaluated points at rank 0 (each point is computed whole by one rank, so the
// tables equal one process's exactly); false at the other ranks, which are done.
bool PruneRun::merge_shards() {
    if (!comm_.distributed()) return true;
    const std::vector<std::string> shards = comm_.gather(points_json(points_, first_, end_).dump());
    if (comm_.rank() != 0) {
        if (out_)
            end_rank(comm_, out_->staging());
        else
            comm_.finish();
        return false;
    }
    for (size_t r = 1; r < shards.size(); ++r) {
        const std::string origin = "points of rank " + std::to_string(r);
        const auto [b, e] = shard_range(int64_t(points_.size()), int64_t(r), comm_.world_size());
        const size_t n =
            read_points(io::parse_json(shards[r], origin), points_, size_t(b), size_t(e), origin);
        SS_CHECK(n == size_t(e - b), origin, " has ", n, " of its ", e - b, " points");
    }
    return true;
}

// prune_random.csv: per sparsity, the random prunings' mean, sample std, min and max.
io::Table PruneRun::random_table() const {
    io::Table table(analysis::tables::kPruneRandom.columns);
    if (o_.random_seeds == 0) return table;
    for (size_t i = 0; i < sparsities_.size(); ++i) {
        std::vector<double> v;
        for (const Point& p : points_)
            if (p.method == "random" && p.sparsity == sparsities_[i]) v.push_back(p.value);
        double mean = 0;
        for (double x : v) mean += x;
        mean /= double(v.size());
        double ss = 0;
        for (double x : v) ss += (x - mean) * (x - mean);
        // Sample standard deviation (n - 1); one seed has no spread (NaN).
        const double sd = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : std::nan("");
        table.add_row({sparsities_[i], counts_[i], measure_, int64_t(v.size()), mean, sd,
                       *std::min_element(v.begin(), v.end()),
                       *std::max_element(v.begin(), v.end())});
    }
    return table;
}

// The tables, run.json and the report, committed; the console summary.
std::string PruneRun::write() {
    const double baseline = points_.front().value;
    io::Table table(analysis::tables::kPrune.columns);
    for (const Point& p : points_)
        table.add_row({p.method, p.seed, p.sparsity, int64_t(p.heads.size()), measure_, p.value,
                       p.mean_nll, p.n_scored, p.value - baseline,
                       head_list(p.heads, cfg().n_heads)});
    const io::Table random = random_table();
    table.write(*files_, analysis::tables::kPrune.name);
    random.write(*files_, analysis::tables::kPruneRandom.name);
    order_table_.write(*files_, analysis::tables::kPruneOrder.name);
    record(record_->json());
    record_->write(*files_);
    if (out_) {
        fs::remove(state_path_);
        report::write_report(out_->staging(), true);  // our own staging folder
        out_->commit();
    }
    comm_.finish();
    log_ << summary(random);
    return out_ ? out_->final_path().string() : std::string();
}

// run.json: the model, the options, the sink convention, both data sets and the definitions.
void PruneRun::record(nlohmann::json& rec) const {
    rec["subcommand"] = "prune";
    rec["model"]["architecture"] = cfg().architecture;
    rec["model"]["format"] = model::weight_format_name(m_->format);
    rec["model"]["tensor_types"] = m_->footprint.tensor_types;  // GGUF quantization types
    rec["device"] = o_.m.device;
    rec["dtype"] = o_.m.dtype;
    rec["bos_policy"] = tokenizer::bos_policy_name(start_.bos);
    rec["options"] = {{"channels", o_.channels},
                      {"sparsity", o_.sparsity},
                      {"heads_pruned", counts_},
                      {"ablation", o_.ablation},
                      {"budget", o_.budget},
                      {"random_seeds", o_.random_seeds},
                      {"seed", o_.seed},
                      {"max_tokens", o_.max_tokens},
                      {"sink", metrics::to_string(hopts_.sink)},
                      {"min_parts", hopts_.min_parts},
                      {"over_context", o_.m.over_context},
                      {"model_context", cfg().n_ctx}};
    // The sink convention as it resolved (auto: first on causal attention), which compare checks.
    const metrics::Masking masking =
        cfg().causal ? metrics::Masking::Causal : metrics::Masking::Bidirectional;
    rec["sink_policy"] = {
        {"requested", metrics::to_string(hopts_.sink)},
        {"resolved", metrics::to_string(metrics::resolve_auto(hopts_.sink, masking))}};
    rec["calibration"] = {{"data", o_.calib},
                          {"samples_requested", o_.calib_samples},  // 0: every sample
                          {"n_samples", calib_->size()},
                          {"n_truncated", calib_->n_truncated},
                          {"truncated_to", calib_->cut_length},
                          {"rows_used", rows_used_}};
    rec["evaluation"] = {{"data", o_.eval},
                         {"samples_requested", o_.eval_samples},
                         {"n_samples", eval_->size()},
                         {"n_truncated", eval_->n_truncated},
                         {"truncated_to", eval_->cut_length},
                         {"n_scored", points_.front().n_scored}};
    rec["measure"] = measure_;
    rec["distributed"] = {{"world_size", comm_.world_size()},
                          {"sharding",
                           "contiguous: rank r evaluates points [P r / W, P (r + 1) / "
                           "W) of the P in prune.csv's order"}};
    rec["baseline"] = io::json_number(points_.front().value);
    // Spec 7's statistics of this model on the calibration set (model scope, model-wide sink),
    // for `compare`'s regime predictor when no analyze run of the model is given.
    rec["regime_inputs"] = {{"rho", io::json_number(dispersion_.rho)},
                            {"v_b", io::json_number(dispersion_.v_b)},
                            {"c_perp", io::json_number(dispersion_.c_perp)},
                            {"n_rows", dispersion_.n_rows},
                            {"data", "calibration set"}};
    rec["definitions"] = {
        {"redundancy",
         "distance of a head to its nearest surviving head under the channel; the "
         "smallest is removed first, recomputed after each removal, ties to the "
         "lower (layer, head)"},
        {"n_pruned",
         o_.budget == "per-layer"
             ? "round(sparsity x heads per layer), halves up, in every layer (redundancy among "
               "the layer's heads; random baselines drawn per layer)"
             : "round(sparsity x heads), halves up"},
        {"perplexity", "exp of the mean next-token NLL over every predicted evaluation token"},
        {"pseudo_perplexity",
         "encoders: exp of the mean NLL of masked tokens; in each sample round(0.15 x n) of its n "
         "non-special tokens (at least 1) are replaced by the mask token at once, drawn with "
         "--seed"},
        {"top1_agreement",
         "vision: share of evaluation images whose top-1 label equals the unpruned model's"}};
}

// The console lines: the unpruned measure, each channel's points, the random means.
std::string PruneRun::summary(const io::Table& random) const {
    std::ostringstream s;
    const char* unit = cfg().is_vision() ? " images" : cfg().causal ? " tokens" : " masked tokens";
    s << "unpruned " << measure_ << " " << format_number(points_.front().value) << " ("
      << points_.front().n_scored << unit << ")\n";
    for (const Point& p : points_)
        if (p.method != "none" && p.method != "random")
            s << p.method << " sparsity " << format_number(p.sparsity) << ": " << measure_ << " "
              << format_number(p.value) << "\n";
    for (const auto& row : random.rows())
        s << "random sparsity " << format_number(std::get<double>(row[0])) << ": " << measure_
          << " " << format_number(std::get<double>(row[4])) << " (mean of "
          << std::get<int64_t>(row[3]) << " seeds)\n";
    return s.str();
}

std::string prune(const PruneOptions& o, Communicator& comm, std::ostream& log) {
    return PruneRun(o, comm, log).run();
}

}  // namespace

}  // namespace sinkscope::api
