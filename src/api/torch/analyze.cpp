// The analyze driver (DESIGN.md data flow): data -> tokenizer -> forward with capture hooks ->
// one input's attention/hidden states/values -> analysis pipeline -> tables, run.json,
// report.html. State is saved atomically every K inputs; --resume continues from it.
#include "sinkscope/api/analyze.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <tuple>

#include <ATen/ATen.h>

#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/analysis/layers.hpp"
#include "sinkscope/analysis/pipeline.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/api/interventions.hpp"
#include "sinkscope/api/resumable.hpp"
#include "sinkscope/api/run_outputs.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/parallel.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/model_files.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/report/report.hpp"

#include "command_start.hpp"
#include "layer_ranks.hpp"

namespace fs = std::filesystem;

namespace sinkscope::api {

using analysis::AnalysisInputs;

namespace {

constexpr const char* kStateFile = "state.bin";

// State format 5: resumable.hpp's checked header line, then the inputs done (of this rank's
// shard) and one state per registry analysis, named, and the streamed tables' sizes.
constexpr StateFormat kState{"analyze", 5};

// What a run depends on: a resumed run must have exactly these (a rank resumes its own shard).
nlohmann::json fingerprint(const AnalyzeOptions& o, const AnalysisInputs& inputs,
                           const Communicator& comm) {
    nlohmann::json options = analysis::to_json(o.analysis);
    options.erase("threads");  // results do not depend on it
    return {{"model", fs::absolute(o.m.model).string()},
            {"rank", comm.rank()},
            {"world_size", comm.world_size()},
            {"inputs_sha256", analysis::inputs_sha256(inputs)},
            {"options", options},
            {"device", o.m.device},
            {"dtype", o.m.dtype},
            {"bos", o.m.bos},
            {"attention_memory_mb", o.attention_memory_mb},
            {"layers", o.layers},
            {"split", o.split},
            {"stages", o.stages},
            {"checkpoint", o.checkpoint},
            {"model_name", o.model_name}};
}

// What the BOS policy resolved to: whether the tokenizer prepends BOS (policy and the tokenizer's
// config), which token, and how many inputs start with it (ids given in the data bypass the
// tokenizer, so this counts what was run).
nlohmann::json resolved_bos(const model::Model& m, tokenizer::BosPolicy policy,
                            const std::vector<std::vector<int32_t>>& ids) {
    nlohmann::json j = {{"policy", tokenizer::bos_policy_name(policy)}};
    const tokenizer::Tokenizer* t = m.tokenizer();
    if (!t) {
        j["prepended"] = false;
        j["reason"] = m.config().is_vision() ? "images have no tokens" : "no tokenizer";
        return j;
    }
    const bool prepend = policy == tokenizer::BosPolicy::Always ||
                         (policy == tokenizer::BosPolicy::ModelDefault && t->adds_bos_by_default());
    j["prepended"] = prepend;
    j["reason"] = policy == tokenizer::BosPolicy::ModelDefault
                      ? std::string("the tokenizer's config ") +
                            (t->adds_bos_by_default() ? "adds BOS" : "adds no BOS")
                      : std::string("--bos ") + tokenizer::bos_policy_name(policy);
    const int32_t id = t->bos_id();
    j["token_id"] = id;
    j["token"] = id >= 0 ? t->piece(id) : std::string();
    int64_t starting = 0;
    for (const auto& x : ids) starting += !x.empty() && id >= 0 && x[0] == id ? 1 : 0;
    j["inputs_starting_with_bos"] = starting;
    return j;
}

// Token strings at each recorded input's model-wide sink position, with their counts.
nlohmann::json sink_tokens(const model::Model& m, const std::vector<std::vector<int32_t>>& ids,
                           const nlohmann::json& positions) {
    nlohmann::json counts = nlohmann::json::object();
    const tokenizer::Tokenizer* t = m.tokenizer();
    if (!t) return counts;
    for (size_t k = 0; k < positions.size() && k < ids.size(); ++k) {
        const nlohmann::json& p = positions[k]["model"];
        if (!p.is_number_integer()) continue;
        const int64_t pos = p.get<int64_t>();
        if (pos < 0 || pos >= int64_t(ids[k].size())) continue;
        const std::string piece = t->piece(ids[k][size_t(pos)]);
        counts[piece] = counts.value(piece, 0) + 1;
    }
    return counts;
}

// One console line: "BOS: prepended, id 1 '<s>' (the tokenizer's config adds BOS), first token of
// 200 of 200 inputs; sink: first, token '<s>' in 200 inputs".
std::string describe_bos_and_sink(const nlohmann::json& bos, const nlohmann::json& sink,
                                  size_t n_inputs) {
    std::ostringstream s;
    s << "BOS: " << (bos["prepended"].get<bool>() ? "prepended" : "not prepended");
    if (bos.contains("token_id"))
        s << ", id " << bos["token_id"].get<int64_t>() << " "
          << quote(bos["token"].get<std::string>()) << " (" << bos["reason"].get<std::string>()
          << "), first token of " << bos["inputs_starting_with_bos"].get<int64_t>() << " of "
          << count_of(int64_t(n_inputs), "input");
    else
        s << " (" << bos["reason"].get<std::string>() << ")";
    s << "; sink: " << sink["resolved"].get<std::string>();
    const nlohmann::json& tokens = sink["tokens"];
    if (!tokens.empty()) {
        s << ", token";
        size_t shown = 0;
        for (const auto& [piece, count] : tokens.items()) {
            if (shown++ == 3) {
                s << " and " << tokens.size() - 3 << " more";
                break;
            }
            s << (shown > 1 ? "," : "") << " " << quote(piece) << " in "
              << count_of(count.get<int64_t>(), "input");
        }
    }
    s << "\n";
    return s.str();
}

// One shard's state for rank 0: the pipeline's saved state, then its streamed rows by table.
std::string shard_bytes(analysis::AnalysisPipeline& pipeline) {
    BinaryWriter w;
    pipeline.save(w);
    const std::map<std::string, std::string> rows = pipeline.stream_rows();
    w.put<uint64_t>(rows.size());
    for (const auto& [name, text] : rows) {
        w.put_string(name);
        w.put_string(text);
    }
    return w.bytes();
}

AnalyzeSummary analyze(const AnalyzeOptions& o, Communicator& comm, std::ostream& log);

// The data columns carried into the per-input tables: --keep-columns, then the --group-by column
// when not among them.
std::vector<std::string> kept_columns(const AnalyzeOptions& o) {
    std::vector<std::string> keep = o.keep_columns;
    const std::string& group = o.analysis.group_by;
    if (!group.empty() && std::find(keep.begin(), keep.end(), group) == keep.end())
        keep.push_back(group);
    return keep;
}

// --split layers: the processes per pipeline (--stages, or the whole world), which must divide
// the world.
int64_t pipeline_stages(const AnalyzeOptions& o, int64_t world) {
    const int64_t stages = o.stages > 0 ? o.stages : world;
    if (world % stages != 0)
        throw UsageError("--stages " + std::to_string(stages) + " does not divide --world-size " +
                         std::to_string(world) +
                         ": every pipeline of layer ranks needs --stages processes");
    return stages;
}

// --split layers over several processes: the stages checked against the world and the model's
// layer count (read from its configuration alone) before any process connects, so that each
// refuses with its own message; after connecting, the first to fail would stop the others
// before they reach the check.
void check_layer_split(const AnalyzeOptions& o) {
    if (o.split != "layers") return;
    const int64_t world =
        o.communicator ? o.communicator->world_size() : resolve_dist(o.dist).world_size;
    if (world <= 1) return;
    const int64_t stages = pipeline_stages(o, world);
    layer_stage(model::read_model_config(io::locate_model(o.m.model)).n_layers, 0, stages);
}

}  // namespace

void check_analyze_options(const AnalyzeOptions& o) {
    // A row enters the compositional analyses with >= min_parts visible keys, and the content
    // distances need two keys besides the sink: shorter inputs give no result at all.
    const int64_t min_tokens = std::max<int64_t>(3, o.analysis.min_parts);
    if (o.max_tokens != 0 && o.max_tokens < min_tokens)
        throw UsageError("--max-tokens " + std::to_string(o.max_tokens) +
                         " leaves no row to analyse: rows need " + std::to_string(min_tokens) +
                         " visible keys (--min-parts " + std::to_string(o.analysis.min_parts) +
                         ", and two keys besides the sink), so give --max-tokens >= " +
                         std::to_string(min_tokens));
    if (o.attention_memory_mb < 0) throw UsageError("--attention-memory-mb must be >= 0");
    analysis::check_layer_spec(o.layers);
    if (o.split != "inputs" && o.split != "layers")
        throw UsageError("--split " + quote(o.split) +
                         ": expected inputs (each process analyses its share of the inputs) or "
                         "layers (each process runs its share of the model's layers)");
    if (o.stages < 0) throw UsageError("--stages must be >= 1");
    if (o.stages > 0 && o.split != "layers")
        throw UsageError("--stages " + std::to_string(o.stages) +
                         " applies to --split layers only (it gives the processes per copy of "
                         "the model)");
    if (o.samples < 0) throw UsageError("--samples must be >= 0");
    if (o.checkpoint_every < 1) throw UsageError("--checkpoint-every must be >= 1");
    if (o.memory && o.resume)
        throw UsageError(
            "--resume continues a run in its output folder: a run in memory keeps "
            "no saved state");
    // Each kept column becomes a column of the per-input tables: names must be new there.
    const std::vector<std::string>& fixed = analysis::tables::kPerInputColumns;
    for (const std::string& c : kept_columns(o)) {
        if (c.empty()) throw UsageError("--keep-columns: an empty column name");
        if (std::count(o.keep_columns.begin(), o.keep_columns.end(), c) > 1)
            throw UsageError("--keep-columns names " + quote(c) + " twice");
        if (std::find(fixed.begin(), fixed.end(), c) != fixed.end())
            throw UsageError("--keep-columns / --group-by: " + quote(c) +
                             " is already a column of the per-input tables (" +
                             "model, checkpoint, input, row, layer, head, metric, param, value, "
                             "weight)");
    }
    parse_progress_mode(o.progress);
    analysis::parse_over_context(o.m.over_context);
    tokenizer::parse_bos_policy(o.m.bos);
    load_options(o.m);  // device, dtype, threads
    if (!o.communicator) resolve_dist(o.dist);
    analysis::AnalysisOptions aopts = o.analysis;
    aopts.threads = o.m.threads;
    analysis::resolve(aopts, {.hidden_states = true, .data_columns = true, .source = o.m.model});
}

std::string AnalyzeSummary::line() const {
    // After --resume this process analysed only the inputs after the saved state: say both.
    std::string done;
    if (resumed > 0)
        done = "; " + std::to_string(this_process) + " in this process, " +
               std::to_string(resumed) + " resumed from the saved state";
    char took[32];
    std::snprintf(took, sizeof took, ") in %.1f s", seconds);
    return "analyzed " + count_of(inputs, "input") + " (" + count_of(tokens, "token") + done + took;
}

AnalyzeSummary run_analyze(const AnalyzeOptions& o, std::ostream& log) {
    check_analyze_options(o);
    check_layer_split(o);
    return with_communicator(o.dist, o.communicator,
                             [&](Communicator& comm) { return analyze(o, comm, log); });
}

namespace {

// One rank's analyze run, step by step: what this rank does in the world (plan), the model,
// data and analyses (load), then either a later stage's blocks of its pipeline (follow_leader)
// or the staged output folder, the inputs streamed through the pipeline, the shards merged at
// rank 0 and the outputs with run.json (the leaders).
class AnalyzeRun {
public:
    AnalyzeRun(const AnalyzeOptions& o, Communicator& comm, std::ostream& log)
        : o_(o), comm_(comm), log_(log) {}

    AnalyzeSummary run() {
        plan();
        load();
        if (!writes_) return follow_leader();
        open_output();
        stream();
        if (!merge_shards()) return {};
        return write();
    }

private:
    void plan();
    void load();
    AnalyzeSummary follow_leader();
    void open_output();
    void open_stages();
    void stream();
    bool merge_shards();
    AnalyzeSummary write();
    void record_model(nlohmann::json& rec) const;
    void record_data(nlohmann::json& rec) const;
    void record_attention(nlohmann::json& rec) const;
    void record_distribution(nlohmann::json& rec) const;

    analysis::AnalysisPipeline make_pipeline() const {
        return analysis::AnalysisPipeline(layers_.size(), m_->config().n_heads, resolved_,
                                          model_name_, o_.m.model, o_.checkpoint, layers_);
    }
    // Whether input n's attention rows are recomputed (analysis/lazy_attention.hpp).
    bool lazy_at(size_t n) const {
        if (plan_.edits_pattern()) return false;  // the rows read are the edited ones
        return analysis::use_lazy_attention(m_->config(), inputs_->n_tokens(n),
                                            o_.attention_memory_mb, layers_.size());
    }
    // Input n forwarded stage by stage over this rank's pipeline of layer ranks.
    model::ForwardResult staged(size_t n) const {
        model::CaptureSpec spec =
            model::CaptureSpec(
                analysis::capture_patterns(m_->config(), want_, lazy_at(n), captured_layers_))
                .without_logits();
        spec.add_edits(edits_for(n));
        return staged_forward(*m_, inputs_->model_input(*m_, n), spec, comm_, stages_);
    }
    void save_state(int64_t done) {
        BinaryWriter w;
        w.put<int64_t>(done);
        pipeline_->save(w);
        write_file_atomic(state_path_, seal_state(kState, print_, w.bytes()));
        out_->keep_on_failure();  // from now on an interruption leaves something to resume
    }

    const AnalyzeOptions& o_;
    Communicator& comm_;
    std::ostream& log_;
    // plan()
    int64_t rank_ = 0, stages_ = 1, pipelines_ = 1, group_ = 0, leader_ = 0;
    bool last_ = true, layer_ranks_ = false, writes_ = true;
    analysis::CaptureWants want_;  // the model vectors the selected analyses read
    analysis::AnalysisOptions aopts_;
    analysis::ResolvedOptions resolved_;
    CommandStart start_;
    std::optional<io::RunRecord> record_;
    std::chrono::steady_clock::time_point t0_;
    // load()
    std::optional<model::Model> m_;
    analysis::LayerSelection layers_;
    std::vector<int64_t> captured_layers_;  // empty: every layer
    std::optional<AnalysisInputs> inputs_;
    std::string model_name_;
    int64_t first_ = 0, end_ = 0, at_once_ = 1;
    std::optional<analysis::AnalysisPipeline> pipeline_;
    InterventionPlan plan_;                      // --intervene
    std::optional<RunInterventions> intervene_;  // its hooks per input
    // The editing hooks of --intervene for input n (none without it).
    model::CaptureSpec edits_for(size_t n) const {
        return intervene_ ? intervene_->edits_for(n) : model::CaptureSpec();
    }
    nlohmann::json print_;
    // open_output(), stream()
    std::optional<OutputDir> out_;   // on disk only
    std::optional<RunFiles> files_;  // the staging folder's, or o_.memory
    fs::path state_path_;
    int64_t n_done_ = 0, tokens_ = 0;
    metrics::Masking masking_ = metrics::Masking::Causal;
};

void AnalyzeRun::plan() {
    rank_ = comm_.rank();
    last_ = !o_.communicator;  // a caller's communicator goes on to other runs
    // --split layers: the ranks form pipelines of `stages` consecutive ranks (layer_ranks.hpp);
    // each pipeline's first rank (its leader) analyses the pipeline's shard of the inputs, the
    // other ranks only run their blocks and write nothing. --split inputs: pipelines of one
    // rank, each its own leader.
    layer_ranks_ = o_.split == "layers" && comm_.distributed();
    stages_ = layer_ranks_ ? pipeline_stages(o_, comm_.world_size()) : 1;
    pipelines_ = comm_.world_size() / stages_, group_ = rank_ / stages_;
    leader_ = group_ * stages_;  // the first rank of this rank's pipeline
    writes_ = rank_ == leader_;
    aopts_ = o_.analysis;
    aopts_.threads = o_.m.threads;
    resolved_ = analysis::resolve(
        aopts_, {.hidden_states = true, .data_columns = true, .source = o_.m.model});
    start_ = start_command(o_.m, o_.progress, o_.out, o_.overwrite, rank_, writes_ && !o_.memory);
    for (const auto& info : analysis::registry())
        if (resolved_.selected(info.name)) {
            want_.hidden = want_.hidden || info.needs.hidden_states;
            want_.queries_keys = want_.queries_keys || info.needs.queries_keys;
        }
    record_.emplace(o_.command_line, resolved_.threads);
    t0_ = std::chrono::steady_clock::now();
}

void AnalyzeRun::load() {
    m_.emplace(model::load_model(o_.m.model, load_options(o_.m)));
    record_->set_model_files(o_.m.model, m_->files);  // hashed in the background
    const auto& cfg = m_->config();
    if (layer_ranks_) layer_stage(cfg.n_layers, rank_ % stages_, stages_);  // each rank some
    // The layers analysed: their hooks alone are captured (capture.hpp), by model index.
    layers_ = analysis::select_layers(o_.layers, cfg.n_layers);
    if (!layers_.all()) captured_layers_ = layers_.ids;
    inputs_.emplace(analysis::load_inputs(*m_,
                                          {.data = o_.data,
                                           .text_column = o_.text_column,
                                           .max_tokens = o_.max_tokens,
                                           .over_context = start_.over_context,
                                           .samples = o_.samples,
                                           .seed = o_.analysis.seed,
                                           .keep_columns = kept_columns(o_)},
                                          start_.bos));  // text ids or images
    print_note(inputs_->truncation_note());
    print_warning(inputs_->samples_note("--samples"));

    if (resolved_.head.sink.bos_id < 0) resolved_.head.sink.bos_id = model_bos_id(*m_);
    resolved_.ref_frame.sink = resolved_.head.sink;
    if (cfg.attention != model::AttentionFunction::Softmax)
        print_note(std::string("the model's attention function is ") +
                   model::attention_function_name(cfg.attention) +
                   ": its rows do not sum to 1, and every analysis reads each row divided by its "
                   "sum over the visible keys");
    if (cfg.kv_slot)
        print_note(
            "the model has a learnable key/value slot in every layer: its rows over the tokens "
            "sum to 1 less the slot's weight, and every analysis reads each row divided by its "
            "sum over the visible keys (sink_geometry.csv's slot_mass is the slot's weight)");
    plan_ = parse_interventions(o_.intervene, cfg, o_.analysis.sink);
    if (!plan_.empty()) {
        print_note("the model runs intervened (--intervene " + plan_.text() +
                   "): every analysis reads the edited forward");
        if (layer_ranks_ && (plan_.needs_mean_z() || plan_.needs_resample()))
            throw UsageError(
                "--intervene: mean and resample ablation need whole forwards; "
                "they do not run with --split layers");
        intervene_.emplace(*m_, *inputs_, plan_, resolved_.head.sink.bos_id);
    }
    model_name_ =
        o_.model_name.empty() ? fs::absolute(o_.m.model).filename().string() : o_.model_name;
    // This rank's inputs: its pipeline's contiguous shard [first, end) (all of them in a world of
    // one, or of one pipeline).
    std::tie(first_, end_) = shard_range(int64_t(inputs_->ids.size()), group_, pipelines_);
    // Inputs whose forwards run side by side (core/parallel.hpp). Then the analyses of each run
    // on one thread: their own split of an input over --threads joins its threads several times
    // an input, and on a busy machine every join waits for the slowest thread's next time slice
    // (bench/threads_contention.py beside two busy loops on 2 cores: 1.36x one thread's time
    // with the split, 0.8x without). One input at a time (long inputs): they split it.
    // Layer ranks: one input at a time (each forward is a chain of collectives).
    at_once_ = layer_ranks_
                   ? 1
                   : analysis::inputs_at_once(cfg, *inputs_, first_, end_, resolved_.threads,
                                              o_.attention_memory_mb, want_, layers_.size());
    if (at_once_ > 1) {
        resolved_.head.n_threads = 1;
        resolved_.head_analyses.n_threads = 1;
        resolved_.ref_frame.threads = 1;
    }
    pipeline_.emplace(layers_.size(), cfg.n_heads, resolved_, model_name_, o_.m.model,
                      o_.checkpoint, layers_);  // as make_pipeline() (the pipeline is not moved)
    // The per-input tables' row and data columns (rank 0 writes the merged streams with these).
    pipeline_->set_input_labels({inputs_->rows, inputs_->kept_columns, inputs_->kept});
    pipeline_->set_first_input(first_);

    print_ = fingerprint(o_, *inputs_, comm_);
    // Every rank runs the same model (whatever path it has there), data and options, or all
    // refuse before anything is written.
    if (comm_.distributed()) {
        nlohmann::json same = print_;
        same["model"] = model_identity(o_.m.model, m_->files);
        comm_.agree(same);
    }
}

// A later stage of a pipeline: its blocks of the shard, then the merge.
AnalyzeSummary AnalyzeRun::follow_leader() {
    // The leader says where the pipeline starts (after its saved state, with --resume).
    const std::string from = comm_.recv(leader_);
    BinaryReader r(from, "the resume point of rank " + std::to_string(leader_));
    const auto done = r.get<int64_t>();
    if (done < 0 || done > end_ - first_ || !r.at_end()) r.fail("not an input count");
    for (int64_t n = first_ + done; n < end_; ++n) staged(size_t(n));
    if (pipelines_ > 1) comm_.gather("");
    comm_.finish(last_);
    return {};
}

// The staged output folder, resumed from its saved state when asked (or the run's files in
// memory).
void AnalyzeRun::open_output() {
    if (o_.memory) {
        files_ = *o_.memory;
        open_stages();
        return;
    }
    out_.emplace(OutputDir::resumable(start_.out, o_.overwrite));
    files_ = RunFiles(out_->staging());
    state_path_ = out_->file(kStateFile);
    const int64_t shard = end_ - first_;
    if (std::optional<std::string> bytes = interrupted_state(*out_, state_path_, o_.resume, log_)) {
        const std::string payload = open_state(*bytes, state_path_, kState, print_, *out_);
        BinaryReader r(payload, state_path_.string());
        n_done_ = r.get<int64_t>();
        // Checked before it indexes anything: the count of this shard's inputs already analysed.
        if (n_done_ < 0 || n_done_ > shard)
            r.fail("it says " + std::to_string(n_done_) + " inputs were done, of " +
                   std::to_string(shard));
        pipeline_->load(r);
        if (!r.at_end()) r.fail("bytes after the last analysis state");
        log_ << "resuming at input " << first_ + n_done_ << " of " << inputs_->ids.size() << "\n";
        log_.flush();
    }
    if (n_done_ > 0) out_->keep_on_failure();
    open_stages();
}

// The pipeline's other stages start where it does; the streamed tables open.
void AnalyzeRun::open_stages() {
    for (int64_t k = 1; k < stages_; ++k) {
        BinaryWriter w;
        w.put<int64_t>(n_done_);
        comm_.send(w.bytes(), rank_ + k);
    }
    pipeline_->open_streams(*files_);
}

// The shard's inputs forwarded (side by side when several fit) and added to the pipeline in
// input order, state saved every --checkpoint-every inputs.
void AnalyzeRun::stream() {
    const int64_t shard = end_ - first_;
    Progress bar("analyze", shard, start_.progress);
    pipeline_->set_progress(bar.stage_reporter());
    for (int64_t n = first_; n < first_ + n_done_; ++n) tokens_ += inputs_->n_tokens(size_t(n));
    // One input's forward and what the analyses read of it, on whichever thread (every forward
    // runs on one compute thread, model.hpp): the same bits for any --threads.
    struct Forwarded {
        analysis::Captured c;
        std::vector<std::string> pieces;
    };
    // The token texts, for the analyses that name keys by them (registry Needs::token_strings).
    const bool want_pieces = m_->tokenizer() && pipeline_->wants_token_strings();
    const int64_t start = first_ + n_done_;
    if (start < end_) bar.stage("forward", 0, 1);
    const bool intervened = !plan_.empty();
    ordered_parallel(
        end_ - start, int(at_once_), at_once_,
        [&](int64_t i) {
            // The inputs run side by side share the compute threads (model.hpp).
            const model::ForwardWorkers share(
                model::forward_share(std::min(at_once_, end_ - start)));
            const size_t n = size_t(start + i);
            const bool lazy = lazy_at(n);
            const model::CaptureSpec edits = intervened ? edits_for(n) : model::CaptureSpec();
            Forwarded f{layer_ranks_ ? analysis::captured_from(staged(n), *m_, *inputs_, n, want_,
                                                               lazy, captured_layers_)
                                     : analysis::capture_input(*m_, *inputs_, n, want_, lazy,
                                                               captured_layers_,
                                                               intervened ? &edits : nullptr),
                        {}};
            if (want_pieces)
                for (int32_t id : inputs_->ids[n]) f.pieces.push_back(m_->tokenizer()->piece(id));
            return f;
        },
        [&](int64_t i, Forwarded f) {
            const int64_t n = start + i;
            masking_ = f.c.attention.masking;
            pipeline_->add(f.c.attention, want_pieces ? &f.pieces : nullptr,
                           want_.hidden || want_.queries_keys ? &f.c.vectors : nullptr);
            tokens_ += inputs_->n_tokens(size_t(n));
            const int64_t done = n + 1 - first_;
            bar.update(done, tokens_);
            // A rank also saves its finished shard: a resume after another rank failed skips it.
            if (out_ && ((done % o_.checkpoint_every == 0 && done < shard) ||
                         (done == shard && pipelines_ > 1)))
                save_state(done);
            if (o_.after_input) o_.after_input(done);
            if (done < shard) bar.stage("forward", 0, 1);  // waiting on the next input's
        });
    bar.finish();
}

// The pipelines' shards merged at rank 0, in rank order; false on the other leaders, which send
// theirs and are done.
bool AnalyzeRun::merge_shards() {
    if (pipelines_ > 1) {
        const std::vector<std::string> shards =
            comm_.gather(rank_ == 0 ? "" : shard_bytes(*pipeline_));
        if (rank_ != 0) {
            if (out_)
                end_rank(comm_, out_->staging(), last_);
            else
                comm_.finish(last_);
            return false;
        }
        for (size_t k = 1; k < shards.size(); ++k) {
            if (int64_t(k) % stages_ != 0) continue;  // not a leader: no state
            const std::string origin = "state of rank " + std::to_string(k);
            BinaryReader r(shards[k], origin);
            analysis::AnalysisPipeline other = make_pipeline();
            other.load(r);
            std::map<std::string, std::string> rows;
            for (auto n = r.get<uint64_t>(); n > 0; --n) {
                std::string name = r.get_string();
                rows[name] = r.get_string();
            }
            if (!r.at_end()) r.fail("bytes after the streamed rows");
            pipeline_->merge(other, rows);
        }
    }
    tokens_ = 0;
    for (size_t n = 0; n < inputs_->ids.size(); ++n) tokens_ += inputs_->n_tokens(n);
    return true;
}

// The tables, run.json and the report, committed.
AnalyzeSummary AnalyzeRun::write() {
    const analysis::PipelineResults results = pipeline_->finish();
    write_outputs(results, *files_);
    for (const auto& w : results.warnings) std::cerr << "sinkscope: warning: " << w << "\n";
    log_ << results.summary;
    nlohmann::json& rec = record_->json();
    rec.update(results.record);
    rec["options"] = analysis::to_json(aopts_);
    rec["options"]["threads"] = resolved_.threads;  // --threads resolved (0: the core count)
    // Runs of other layers differ in their model-wide values (compare says so); a run of every
    // layer records no option, as before --layers.
    if (!layers_.all()) rec["options"]["layers"] = layers_.spec();
    record_model(rec);
    rec["subcommand"] = "analyze";
    rec["checkpoint"] = o_.checkpoint;
    rec["device"] = o_.m.device;
    rec["dtype"] = o_.m.dtype;
    rec["threads"] = resolved_.threads;
    rec["tokenizer"] = m_->tokenizer()            ? m_->tokenizer()->kind()
                       : m_->config().is_vision() ? "none (images)"
                                                  : "none (token ids given)";
    rec["bos_policy"] = tokenizer::bos_policy_name(start_.bos);
    const nlohmann::json bos_record = resolved_bos(*m_, start_.bos, inputs_->ids);
    rec["bos"] = bos_record;
    record_data(rec);
    rec["sink_policy"] = {
        {"requested", o_.analysis.sink},
        {"resolved", metrics::to_string(metrics::resolve_auto(resolved_.head.sink, masking_))},
        {"positions_file", "sinks.csv"},
        {"positions", pipeline_->sink_positions()},
        {"tokens", sink_tokens(*m_, inputs_->ids, pipeline_->sink_positions())}};
    log_ << describe_bos_and_sink(bos_record, rec["sink_policy"], inputs_->ids.size());
    rec["compat"] = o_.analysis.compat.empty() ? "none (principled)" : o_.analysis.compat;
    record_attention(rec);
    rec["resumed"] = n_done_ > 0;
    record_distribution(rec);
    rec["checkpoint_every"] = o_.checkpoint_every;
    record_->write(*files_);
    if (out_) {
        fs::remove(state_path_);
        const bool reported = o_.report && !report::write_report_if_any(out_->staging()).empty();
        out_->commit();
        if (o_.report && !reported) log_ << report::kNoFigureNote;
    }
    comm_.finish(last_);
    const AnalyzeSummary summary{
        .inputs = int64_t(inputs_->ids.size()),
        .tokens = tokens_,
        .resumed = n_done_,
        .this_process = end_ - first_ - n_done_,
        .seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count()};
    log_ << summary.line() << (out_ ? "; wrote " + o_.out.string() : std::string()) << "\n";
    return summary;
}

// run.json: the layers analysed, the model's shape and how its attention rows are computed.
void AnalyzeRun::record_model(nlohmann::json& rec) const {
    const auto& cfg = m_->config();
    // The edits of the forward (--intervene; null: the model as it is).
    rec["intervention"] = plan_.empty()
                              ? nlohmann::json(nullptr)
                              : nlohmann::json{{"spec", plan_.text()}, {"edits", plan_.record()}};
    rec["layers"] = {
        {"analysed", layers_.all() ? nlohmann::json("all") : nlohmann::json(layers_.ids)},
        {"model_layers", cfg.n_layers},
        {"rule",
         "the forward runs every layer; the analyses read the attention of the analysed "
         "layers only, so model-wide values (layer -1) pool those layers; every table "
         "names a layer by its index in the model"}};
    rec["model"]["architecture"] = cfg.architecture;
    rec["model"]["n_params"] = m_->n_params();  // compare plots sink quantities against it
    rec["model"]["name"] = model_name_;         // the tables' model column
    rec["model"]["format"] = model::weight_format_name(m_->format);
    rec["model"]["tensor_types"] = m_->footprint.tensor_types;  // GGUF quantization types
    rec["model"]["dims"] = {{"n_layers", cfg.n_layers},     {"n_heads", cfg.n_heads},
                            {"n_kv_heads", cfg.n_kv_heads}, {"d_model", cfg.d_model},
                            {"d_head", cfg.d_head},         {"d_vocab", cfg.d_vocab}};
    // How the attention rows were computed (spec section 0: Z is after scale, soft-cap and mask).
    nlohmann::json attn = {{"kind", cfg.causal ? "causal" : "bidirectional"},
                           {"scale", cfg.score_scale()},
                           {"softcap", nullptr},
                           {"final_logit_softcap", nullptr},
                           {"sliding_window", nullptr},
                           {"window_layers", nlohmann::json::array()}};
    if (cfg.attn_softcap > 0) attn["softcap"] = cfg.attn_softcap;
    if (cfg.final_softcap > 0) attn["final_logit_softcap"] = cfg.final_softcap;
    if (cfg.causal && cfg.window > 0) {
        attn["sliding_window"] = cfg.window;
        for (int64_t l = 0; l < cfg.n_layers; ++l)
            if (cfg.layer_window(l) > 0) attn["window_layers"].push_back(l);
    }
    // The attention function (train --attention-function): rows of softmax_one and sigmoid are
    // read closed (analysis/capture.hpp, docs/metrics.md).
    attn["function"] = model::attention_function_name(cfg.attention);
    attn["kv_slot"] = cfg.kv_slot;
    attn["rows"] = cfg.rows_sum_to_one()
                       ? "as computed (softmax rows sum to 1)"
                       : "closed: each row divided by its sum over the visible keys; scores are "
                         "the closed row's logits";
    rec["model"]["attention"] = attn;
}

// run.json "data": what was run, as tokenised, and which rows of the data file.
void AnalyzeRun::record_data(nlohmann::json& rec) const {
    const AnalysisInputs& inputs = *inputs_;
    rec["data"] = {{"source", inputs.data_name},
                   {"n_samples", inputs.ids.size()},
                   {"n_tokens", tokens_},
                   {"max_tokens", o_.max_tokens},
                   {"n_truncated", inputs.n_truncated},
                   {"truncated_to", inputs.cut_length},
                   {"model_context", inputs.context},
                   {"over_context", o_.m.over_context}};
    rec["data"]["kind"] = inputs.kind;
    // The inputs as tokenised: compare refuses runs of different inputs by this hash.
    rec["data"]["inputs_sha256"] = analysis::inputs_sha256(inputs);
    rec["data"]["selection"] =
        o_.analysis.seed && o_.samples > 0
            ? "random subset (seed " + std::to_string(*o_.analysis.seed) + ")"
            : std::string("first samples");
    rec["data"]["samples_requested"] = o_.samples;  // 0: every sample
    if (inputs.fewer_samples_than_requested())
        rec["data"]["samples_note"] = inputs.samples_note("--samples");
    // Which rows of the data file were run, in input order: the `row` column of the per-input
    // tables and sinks.csv.
    rec["data"]["rows"] = inputs.rows;
    rec["data"]["row"] = inputs.images ? "the image's 0-based index in the image set (sorted file "
                                         "names)"
                                       : "0-based: the line of a text or JSONL file (empty lines "
                                         "count), the record after the header of a CSV file, the "
                                         "row of a .npy file or of the built-in prompts";
    rec["data"]["keep_columns"] = inputs.kept_columns;
    if (inputs.images)
        rec["data"]["images_sha256"] = inputs.images_sha256;
    else if (!o_.data.empty())
        rec["data"]["sha256"] = sha256_file(o_.data);
}

// run.json "attention_storage": which inputs had their rows recomputed, and the rule.
void AnalyzeRun::record_attention(nlohmann::json& rec) const {
    int64_t n_recomputed = 0;
    for (size_t k = 0; k < inputs_->size(); ++k) n_recomputed += lazy_at(k) ? 1 : 0;
    rec["attention_storage"] = {
        {"memory_mb", o_.attention_memory_mb},
        {"rule",
         "inputs whose fp64 pattern + scores [L, H, T, T] exceed memory_mb have their rows "
         "recomputed from hook_rot_q/hook_rot_k (float32 scores and softmax, as the forward), "
         "in cached blocks of " +
             std::to_string(analysis::LazyAttention::kRowsPerBlock) +
             " rows for the head metrics and blocks of up to " +
             std::to_string(analysis::LazyAttention::kBulkRows) +
             " rows for the reference-frame analyses"},
        {"recomputed_inputs", n_recomputed}};
}

// run.json "distributed": the world and how the inputs (and layers) were shared.
void AnalyzeRun::record_distribution(nlohmann::json& rec) const {
    rec["distributed"] = {{"world_size", comm_.world_size()},
                          {"split", o_.split},
                          {"sharding",
                           "contiguous: rank r analyses inputs [N r / W, N (r + 1) / W); "
                           "rank 0 merges the states in rank order"}};
    if (!layer_ranks_) return;
    rec["distributed"]["stages"] = stages_;
    rec["distributed"]["sharding"] =
        "layers: P = W / S pipelines of S consecutive ranks; pipeline g analyses inputs "
        "[N g / P, N (g + 1) / P), its rank of stage s runs blocks [L s / S, L (s + 1) / S) "
        "of each, the residual stream passes from stage to stage, and the pipeline's first "
        "rank gathers every captured hook and runs every analysis; rank 0 merges the "
        "pipelines' states in order";
}

AnalyzeSummary analyze(const AnalyzeOptions& o, Communicator& comm, std::ostream& log) {
    return AnalyzeRun(o, comm, log).run();
}

}  // namespace

}  // namespace sinkscope::api
