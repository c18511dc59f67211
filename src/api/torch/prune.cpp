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

namespace fs = std::filesystem;

namespace sinkscope::api {

namespace {

// resumable.hpp's checked header line, then {"points": [{value, mean_nll, n_scored}, ...]}, the
// evaluated points in the order of the run's points.
constexpr const char* kStateFile = "prune_state.json";
constexpr StateFormat kState{"prune", 2};
// Per-input attention above this many MB is recomputed row by row (as analyze's default).
constexpr int64_t kAttentionMemoryMb = 1024;

// Section 5 channels: the user's name and the head distance matrix it reads (metrics/head.hpp).
struct Channel {
    const char* name;
    const char* matrix;
};
constexpr Channel kChannels[] = {
    {"js", "js_keep"}, {"dA_perp", "dA_perp"}, {"dA", "dA"}, {"cosine", "cosine_keep"}};

std::vector<Channel> parse_channels(const std::string& s) {
    std::vector<Channel> out;
    std::set<std::string> seen;
    for (const std::string& name : split_list(s)) {
        const Channel* found = nullptr;
        for (const Channel& c : kChannels)
            if (name == c.name) found = &c;
        if (!found)
            throw UsageError("--channels: unknown channel '" + name +
                             "' (known: js, dA_perp, dA, cosine)");
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

std::string prune(const PruneOptions& o, Communicator& comm, std::ostream& log) {
    // ---- options, before anything is loaded -------------------------------------------------
    if (o.calib.empty()) throw UsageError("--calib is required");
    if (o.eval.empty()) throw UsageError("--eval is required");
    if (o.out.empty()) throw UsageError("--out is required");
    const std::vector<Channel> channels = parse_channels(o.channels);
    const std::vector<double> sparsities = parse_sparsities(o.sparsity);
    if (o.ablation != "zero" && o.ablation != "mean")
        throw UsageError("--ablation must be zero or mean");
    if (o.random_seeds < 0 || o.random_seeds > 1000)
        throw UsageError("--random-seeds must be between 0 and 1000");
    if (o.max_tokens < 2) throw UsageError("--max-tokens must be >= 2");
    if (o.calib_samples < 0 || o.eval_samples < 0)
        throw UsageError("--calib-samples and --eval-samples must be >= 0");
    const auto progress = parse_progress_mode(o.progress);
    const auto over_context = analysis::parse_over_context(o.m.over_context);
    const fs::path out_path = rank_output(o.out, comm.rank());
    check_output_dir(out_path, o.overwrite);  // before the model loads
    const auto bos = tokenizer::parse_bos_policy(o.m.bos);
    io::RunRecord record(o.command_line, compute_threads(o.m));

    // ---- model and data ----------------------------------------------------------------------
    const model::Model m = model::load_model(o.m.model, load_options(o.m));
    record.set_model_files(o.m.model, m.files);  // hashed in the background
    const model::ModelConfig& cfg = m.config();
    // What a pruned model is scored by: next-token perplexity (decoders), masked-LM
    // pseudo-perplexity (encoders) or top-1 agreement with the unpruned model (vision).
    const std::string measure = cfg.is_vision() ? "top1_agreement"
                                : cfg.causal    ? "perplexity"
                                                : "pseudo_perplexity";
    const int64_t n_heads_total = cfg.n_layers * cfg.n_heads;
    std::vector<int64_t> counts;  // heads pruned per sparsity
    for (double s : sparsities) {
        try {
            counts.push_back(metrics::heads_to_prune(s, n_heads_total));
        } catch (const UsageError& e) {
            throw UsageError(std::string("--sparsity: ") + e.what());
        }
    }
    // The first `samples` samples (0: all) of a data file, cut to --max-tokens.
    auto load = [&](const std::string& data, int64_t samples) {
        return analysis::load_inputs(m,
                                     {.data = data,
                                      .text_column = o.text_column,
                                      .max_tokens = o.max_tokens,
                                      .over_context = over_context,
                                      .samples = samples,
                                      .seed = std::nullopt},
                                     bos);
    };
    const analysis::AnalysisInputs calib = load(o.calib, o.calib_samples);
    const analysis::AnalysisInputs eval = load(o.eval, o.eval_samples);
    if (!calib.truncation_note().empty()) print_note("--calib: " + calib.truncation_note());
    if (!eval.truncation_note().empty()) print_note("--eval: " + eval.truncation_note());
    print_warning(calib.samples_note("--calib-samples"));
    print_warning(eval.samples_note("--eval-samples"));
    {  // section 5: calibration rows and evaluation text are disjoint
        // An input's identity: its token ids, or for images the bytes of its preprocessed pixels.
        auto identity = [&](const analysis::AnalysisInputs& in, size_t k) {
            if (!cfg.is_vision()) return ids_sha256({in.ids[k]});
            const at::Tensor px = in.model_input(m, k).pixel_values.to(at::kCPU).contiguous();
            Sha256 h;
            h.update(px.data_ptr(), size_t(px.numel()) * px.element_size());
            return h.hex_digest();
        };
        std::set<std::string> calib_set;
        for (size_t k = 0; k < calib.size(); ++k) calib_set.insert(identity(calib, k));
        for (size_t k = 0; k < eval.size(); ++k)
            if (calib_set.count(identity(eval, k)))
                throw UsageError("--calib and --eval overlap: evaluation sample " +
                                 std::to_string(eval.sample_index[k] + 1) + " of " + o.eval +
                                 " is also a calibration sample (the evaluation must be held out)");
        bool scorable = cfg.is_vision() && eval.size() > 0;
        for (const auto& ids : eval.ids) scorable = scorable || ids.size() >= 2;
        if (!scorable)
            throw UsageError("--eval " + o.eval + " has no sample of 2 or more tokens to score");
    }

    // ---- the experiment's points ------------------------------------------------------------
    // Removal order per channel is computed after calibration; the random points are known now.
    std::vector<Point> points;
    auto add_point = [&](std::string method, int64_t seed, double sparsity,
                         std::vector<int64_t> heads) {
        Point p;
        p.method = std::move(method);
        p.seed = seed;
        p.sparsity = sparsity;
        p.heads = std::move(heads);
        points.push_back(std::move(p));
    };
    add_point("none", -1, 0.0, {});
    for (const Channel& c : channels)
        for (double s : sparsities) add_point(c.name, -1, s, {});
    for (int64_t r = 0; r < o.random_seeds; ++r)
        for (size_t i = 0; i < sparsities.size(); ++i)
            add_point("random", int64_t(o.seed) + r, sparsities[i],
                      metrics::random_prune(n_heads_total, counts[i], o.seed + uint64_t(r)));

    const nlohmann::json fingerprint = {{"model", fs::absolute(o.m.model).string()},
                                        {"calib_sha256", ids_sha256(calib.ids)},
                                        {"eval_sha256", ids_sha256(eval.ids)},
                                        {"channels", o.channels},
                                        {"sparsity", o.sparsity},
                                        {"ablation", o.ablation},
                                        {"random_seeds", o.random_seeds},
                                        {"seed", o.seed},
                                        {"device", o.m.device},
                                        {"dtype", o.m.dtype},
                                        {"bos", o.m.bos},
                                        {"measure", measure},
                                        {"rank", comm.rank()},
                                        {"world_size", comm.world_size()}};
    // This rank evaluates the contiguous shard [first, end) of the points (every rank calibrates:
    // the removal orders are needed for its points).
    const auto [first_point, end_point] =
        shard_range(int64_t(points.size()), comm.rank(), comm.world_size());
    const size_t first = size_t(first_point), end = size_t(end_point);
    // Every rank runs the same model (whatever path it has there), data and options, or all
    // refuse before anything is written.
    if (comm.distributed()) {
        nlohmann::json same = fingerprint;
        same["model"] = model_identity(o.m.model, m.files);
        comm.agree(same);
    }
    OutputDir out = OutputDir::resumable(out_path, o.overwrite);
    const fs::path state_path = out.file(kStateFile);
    if (std::optional<std::string> bytes = interrupted_state(out, state_path, o.resume, log)) {
        const std::string file = state_path.string();
        const nlohmann::json state =
            io::parse_json(open_state(*bytes, state_path, kState, fingerprint, out), file);
        const size_t n = read_points(
            state.is_object() ? state.value("points", nlohmann::json()) : nlohmann::json(), points,
            first, end, file);
        log << "resuming at point " << first + n + 1 << " of " << points.size() << "\n";
    }

    // ---- calibration: head distances (model scope) and, for mean ablation, mean z -------------
    analysis::AnalysisOptions aopts;
    aopts.threads = o.m.threads;
    analysis::ResolvedOptions resolved =
        analysis::resolve(aopts, {.hidden_states = true, .source = o.m.model});
    metrics::HeadOptions hopts = resolved.head;
    hopts.scope = metrics::Scope::Model;
    if (hopts.sink.bos_id < 0)
        hopts.sink.bos_id = cfg.bos_token_id >= 0 ? cfg.bos_token_id
                            : m.tokenizer()       ? m.tokenizer()->bos_id()
                                                  : -1;
    metrics::HeadAccumulator acc(cfg.n_layers, cfg.n_heads, hopts);
    {
        Progress bar("prune: calibration", int64_t(calib.size()), progress);
        int64_t tokens = 0;
        // Forwards of several inputs at once, added in input order (core/parallel.hpp).
        const int64_t n_calib = int64_t(calib.size());
        const int64_t at_once = analysis::inputs_at_once(
            cfg, calib, 0, n_calib, int(resolved.threads), kAttentionMemoryMb, false);
        ordered_parallel(
            n_calib, int(at_once), at_once,
            [&](int64_t n) {
                const model::ForwardWorkers share(model::forward_share(std::min(at_once, n_calib)));
                const bool lazy = analysis::use_lazy_attention(cfg, calib.n_tokens(size_t(n)),
                                                               kAttentionMemoryMb);
                return analysis::capture_input(m, calib, size_t(n), false, lazy);
            },
            [&](int64_t n, analysis::Captured c) {
                acc.add(c.attention, n);
                tokens += calib.n_tokens(size_t(n));
                bar.update(n + 1, tokens);
            });
        bar.finish();
    }
    const metrics::HeadResults heads = acc.finish();
    model::HeadMask::Kind kind =
        o.ablation == "mean" ? model::HeadMask::Kind::Mean : model::HeadMask::Kind::Zero;
    at::Tensor z_mean;
    if (kind == model::HeadMask::Kind::Mean) z_mean = model::compute_mean_z(m, calib.ids);

    const int64_t k_max = *std::max_element(counts.begin(), counts.end());
    io::Table order_table(analysis::tables::kPruneOrder.columns);
    for (const Channel& c : channels) {
        const auto order = metrics::greedy_prune_order(heads.distances.at(c.matrix), k_max);
        for (size_t s = 0; s < order.size(); ++s)
            order_table.add_row({std::string(c.name), int64_t(s + 1), order[s].head / cfg.n_heads,
                                 order[s].head % cfg.n_heads, order[s].redundancy});
        for (Point& p : points)
            if (p.method == c.name) {
                const size_t i =
                    size_t(std::find(sparsities.begin(), sparsities.end(), p.sparsity) -
                           sparsities.begin());
                for (int64_t s = 0; s < counts[i]; ++s) p.heads.push_back(order[size_t(s)].head);
            }
    }

    // ---- evaluation -------------------------------------------------------------------------
    auto save_state = [&]() {
        write_file_atomic(
            state_path,
            seal_state(kState, fingerprint,
                       nlohmann::json{{"points", points_json(points, first, end)}}.dump()));
        out.keep_on_failure();  // from now on an interruption leaves something to resume
    };
    // Vision: the unpruned model's top-1 label of every evaluation image is the reference.
    auto top1 = [&](const model::HeadMask* mask) {
        std::vector<int64_t> labels;
        for (size_t k = 0; k < eval.size(); ++k)
            labels.push_back(
                m.forward(eval.model_input(m, k), {}, mask).logits[0].argmax().item<int64_t>());
        return labels;
    };
    const std::vector<int64_t> reference = cfg.is_vision() ? top1(nullptr) : std::vector<int64_t>{};
    const model::MaskedLmOptions mlm{.rate = 0.15, .seed = o.seed};
    auto score = [&](const model::HeadMask* mask, Point& p) {
        if (cfg.is_vision()) {
            const std::vector<int64_t> labels = top1(mask);
            int64_t same = 0;
            for (size_t k = 0; k < labels.size(); ++k) same += labels[k] == reference[k];
            p.value = double(same) / double(labels.size());
            p.mean_nll = std::nan("");
            p.n_scored = int64_t(labels.size());
            return;
        }
        const model::PerplexityResult r =
            cfg.causal ? model::compute_perplexity(m, eval.ids, mask)
                       : model::compute_masked_perplexity(m, eval.ids, mlm, mask);
        p.value = r.perplexity;
        p.mean_nll = r.mean_nll;
        p.n_scored = r.n_tokens;
    };
    Progress bar("prune: evaluation", int64_t(end - first), progress);
    int64_t n_done = 0;
    for (size_t i = first; i < end; ++i) {
        Point& p = points[i];
        if (!p.done) {
            model::HeadMask mask(kind, cfg.n_layers, cfg.n_heads);
            mask.z_mean = z_mean;
            for (int64_t h : p.heads) mask.ablate(h / cfg.n_heads, h % cfg.n_heads);
            score(p.heads.empty() ? nullptr : &mask, p);
            p.done = true;
            save_state();
        }
        ++n_done;
        bar.update(n_done, 0);
        if (o.after_point) o.after_point(n_done);
    }
    bar.finish();
    // Every rank's evaluated points at rank 0 (each point is computed whole by one rank, so the
    // tables equal one process's exactly).
    if (comm.distributed()) {
        const std::vector<std::string> shards = comm.gather(points_json(points, first, end).dump());
        if (comm.rank() != 0) {
            end_rank(comm, out.staging());
            return {};
        }
        for (size_t r = 1; r < shards.size(); ++r) {
            const std::string origin = "points of rank " + std::to_string(r);
            const auto [b, e] = shard_range(int64_t(points.size()), int64_t(r), comm.world_size());
            const size_t n = read_points(io::parse_json(shards[r], origin), points, size_t(b),
                                         size_t(e), origin);
            SS_CHECK(n == size_t(e - b), origin, " has ", n, " of its ", e - b, " points");
        }
    }

    // ---- tables, run.json -------------------------------------------------------------------
    const double baseline = points.front().value;
    io::Table table(analysis::tables::kPrune.columns);
    for (const Point& p : points)
        table.add_row({p.method, p.seed, p.sparsity, int64_t(p.heads.size()), measure, p.value,
                       p.mean_nll, p.n_scored, p.value - baseline,
                       head_list(p.heads, cfg.n_heads)});
    io::Table random_table(analysis::tables::kPruneRandom.columns);
    if (o.random_seeds > 0)
        for (size_t i = 0; i < sparsities.size(); ++i) {
            std::vector<double> v;
            for (const Point& p : points)
                if (p.method == "random" && p.sparsity == sparsities[i]) v.push_back(p.value);
            double mean = 0;
            for (double x : v) mean += x;
            mean /= double(v.size());
            double ss = 0;
            for (double x : v) ss += (x - mean) * (x - mean);
            // Sample standard deviation (n - 1); one seed has no spread (NaN).
            const double sd = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : std::nan("");
            random_table.add_row({sparsities[i], counts[i], measure, int64_t(v.size()), mean, sd,
                                  *std::min_element(v.begin(), v.end()),
                                  *std::max_element(v.begin(), v.end())});
        }
    fs::remove(state_path);
    table.write(out.staging(), analysis::tables::kPrune.name);
    random_table.write(out.staging(), analysis::tables::kPruneRandom.name);
    order_table.write(out.staging(), analysis::tables::kPruneOrder.name);

    nlohmann::json& rec = record.json();
    rec["subcommand"] = "prune";
    rec["model"]["architecture"] = cfg.architecture;
    rec["model"]["format"] = model::weight_format_name(m.format);
    rec["device"] = o.m.device;
    rec["dtype"] = o.m.dtype;
    rec["bos_policy"] = tokenizer::bos_policy_name(bos);
    rec["options"] = {{"channels", o.channels},         {"sparsity", o.sparsity},
                      {"heads_pruned", counts},         {"ablation", o.ablation},
                      {"random_seeds", o.random_seeds}, {"seed", o.seed},
                      {"max_tokens", o.max_tokens},     {"sink", metrics::to_string(hopts.sink)},
                      {"min_parts", hopts.min_parts},   {"over_context", o.m.over_context},
                      {"model_context", cfg.n_ctx}};
    // The sink convention as it resolved (auto: first on causal attention), which compare checks.
    const metrics::Masking masking =
        cfg.causal ? metrics::Masking::Causal : metrics::Masking::Bidirectional;
    rec["sink_policy"] = {
        {"requested", metrics::to_string(hopts.sink)},
        {"resolved", metrics::to_string(metrics::resolve_auto(hopts.sink, masking))}};
    rec["calibration"] = {{"data", o.calib},
                          {"samples_requested", o.calib_samples},  // 0: every sample
                          {"n_samples", calib.size()},
                          {"n_truncated", calib.n_truncated},
                          {"truncated_to", calib.cut_length},
                          {"rows_used", heads.counts.rows_used_model}};
    rec["evaluation"] = {{"data", o.eval},
                         {"samples_requested", o.eval_samples},
                         {"n_samples", eval.size()},
                         {"n_truncated", eval.n_truncated},
                         {"truncated_to", eval.cut_length},
                         {"n_scored", points.front().n_scored}};
    rec["measure"] = measure;
    rec["distributed"] = {{"world_size", comm.world_size()},
                          {"sharding",
                           "contiguous: rank r evaluates points [P r / W, P (r + 1) / "
                           "W) of the P in prune.csv's order"}};
    rec["baseline"] = io::json_number(baseline);
    rec["definitions"] = {
        {"redundancy",
         "distance of a head to its nearest surviving head under the channel; the "
         "smallest is removed first, recomputed after each removal, ties to the "
         "lower (layer, head)"},
        {"n_pruned", "round(sparsity x heads), halves up"},
        {"perplexity", "exp of the mean next-token NLL over every predicted evaluation token"},
        {"pseudo_perplexity",
         "encoders: exp of the mean NLL of masked tokens; in each sample round(0.15 x n) of its n "
         "non-special tokens (at least 1) are replaced by the mask token at once, drawn with "
         "--seed"},
        {"top1_agreement",
         "vision: share of evaluation images whose top-1 label equals the unpruned model's"}};
    record.write(out.staging());
    report::write_report(out.staging(), true);  // our own staging folder
    out.commit();
    comm.finish();

    std::ostringstream s;
    const char* unit = cfg.is_vision() ? " images" : cfg.causal ? " tokens" : " masked tokens";
    s << "unpruned " << measure << " " << format_number(baseline) << " (" << points.front().n_scored
      << unit << ")\n";
    for (const Point& p : points)
        if (p.method != "none" && p.method != "random")
            s << p.method << " sparsity " << format_number(p.sparsity) << ": " << measure << " "
              << format_number(p.value) << "\n";
    for (const auto& row : random_table.rows())
        s << "random sparsity " << format_number(std::get<double>(row[0])) << ": " << measure << " "
          << format_number(std::get<double>(row[4])) << " (mean of " << std::get<int64_t>(row[3])
          << " seeds)\n";
    log << s.str();
    return out.final_path().string();
}

}  // namespace

}  // namespace sinkscope::api
