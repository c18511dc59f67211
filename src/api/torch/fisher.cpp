// The fisher driver (spec section 8, Fisher): data -> one prediction task per sample (the
// model's objective) -> squared gradients summed per tensor and head (analysis/fisher.hpp) ->
// fisher.csv, fisher_tensors.csv, run.json and the report. The sums are saved in the staging
// folder every --checkpoint-every samples, so --resume continues an interrupted run with
// identical tables.
#include "sinkscope/api/fisher.hpp"

#include <cmath>
#include <iostream>
#include <optional>
#include <sstream>
#include <tuple>

#include <ATen/ATen.h>

#include "sinkscope/analysis/fisher.hpp"
#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/api/resumable.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/ref_frame.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/objective.hpp"
#include "sinkscope/report/report.hpp"

#include "command_start.hpp"

namespace fs = std::filesystem;

namespace sinkscope::api {

namespace {

constexpr const char* kStateFile = "fisher_state.json";
constexpr StateFormat kState{"fisher", 1};

std::string fisher(const FisherCommandOptions& o, Communicator& comm, std::ostream& log);

}  // namespace

std::string run_fisher(const FisherCommandOptions& o, std::ostream& log) {
    resolve_dist(o.dist);  // a usage error before any connection
    return with_communicator(o.dist, nullptr,
                             [&](Communicator& comm) { return fisher(o, comm, log); });
}

namespace {

// One rank's fisher run, step by step: the options checked before anything loads (check), the
// model and data (load), the staged folder and any saved state (open_output), one backward per
// sample of the shard (score), the shards added at rank 0 (merge_shards), and the tables, run.json
// and report (write).
class FisherRun {
public:
    FisherRun(const FisherCommandOptions& o, Communicator& comm, std::ostream& log)
        : o_(o), comm_(comm), log_(log) {}

    std::string run() {
        check();
        load();
        open_output();
        score();
        if (!merge_shards()) return {};
        return write();
    }

private:
    void check();
    void load();
    void open_output();
    void score();
    bool merge_shards();
    std::string write();
    void record(nlohmann::json& rec, const analysis::FisherTables& tables) const;

    // The sample's prediction task (decoders: next tokens; encoders: masked tokens; images: the
    // class).
    model::PredictionTask task_of(size_t k) const {
        const model::ModelConfig& cfg = m_->config();
        if (cfg.is_vision()) {
            model::PredictionTask t;
            t.input = inputs_->model_input(*m_, k);
            t.rows = {0};
            return t;
        }
        if (cfg.causal) return model::next_token_task(inputs_->ids[k]);
        return model::masked_lm_task(inputs_->ids[k], vocab_,
                                     {.rate = o_.mask_rate, .seed = fo_.seed},
                                     inputs_->sample_index[k]);
    }
    // The shard's sums: the state file's payload and what rank 0 gathers.
    std::string shard_state() const {
        return nlohmann::json{
            {"inputs_done", n_done_}, {"inputs_skipped", n_skipped_}, {"sums", acc_->state()}}
            .dump();
    }
    void save_state() {
        if (!out_) return;  // in memory: no state
        write_file_atomic(state_path_, seal_state(kState, fingerprint_, shard_state()));
        out_->keep_on_failure();  // from now on an interruption leaves something to resume
    }

    const FisherCommandOptions& o_;
    Communicator& comm_;
    std::ostream& log_;
    analysis::FisherOptions fo_;
    CommandStart start_;
    std::optional<io::RunRecord> record_;
    std::optional<model::Model> m_;
    std::optional<analysis::AnalysisInputs> inputs_;
    std::string objective_;
    model::MaskedLmVocabulary vocab_;
    nlohmann::json fingerprint_;
    int64_t first_ = 0, end_ = 0;
    std::optional<analysis::FisherAccumulator> acc_;
    int64_t n_done_ = 0, n_skipped_ = 0;  // inputs of the shard processed (scored or skipped)
    std::optional<OutputDir> out_;        // on disk only
    std::optional<RunFiles> files_;       // the staging folder's, or o_.memory
    fs::path state_path_;
};

// The options, before anything is loaded.
void FisherRun::check() {
    if (o_.data.empty()) throw UsageError("--data is required");
    if (o_.out.empty() && !o_.memory) throw UsageError("--out is required");
    if (o_.memory && o_.resume)
        throw UsageError(
            "--resume continues a run in its output folder: a run in memory keeps "
            "no saved state");
    fo_.kind = analysis::parse_fisher_kind(o_.kind);
    metrics::check_compat(o_.compat);
    if (o_.draws < 1 || o_.draws > 10000) throw UsageError("--draws must be between 1 and 10000");
    if (o_.draws != 1 && fo_.kind != analysis::FisherKind::True)
        throw UsageError(
            "--draws applies to --kind true (the empirical Fisher uses the data's "
            "labels once)");
    fo_.draws = o_.draws;
    fo_.seed = o_.seed.value_or(fo_.seed);  // unset: the analysis' fixed seed
    if (!(o_.mask_rate > 0.0 && o_.mask_rate < 1.0))
        throw UsageError("--mask-rate must be strictly between 0 and 1");
    analysis::check_loss_max_tokens(o_.max_tokens);
    if (o_.samples < 0) throw UsageError("--samples must be >= 0");
    if (o_.checkpoint_every < 1) throw UsageError("--checkpoint-every must be >= 1");
    start_ = start_command(o_.m, o_.progress, o_.out, o_.overwrite, comm_.rank(), !o_.memory);
    record_.emplace(o_.command_line, compute_threads(o_.m));
}

// The model, the data and what each sample's loss predicts; the ranks' agreement.
void FisherRun::load() {
    m_.emplace(model::load_model(o_.m.model, load_options(o_.m)));
    record_->set_model_files(o_.m.model, m_->files);  // hashed in the background
    const model::ModelConfig& cfg = m_->config();
    if (cfg.is_vision() && fo_.kind == analysis::FisherKind::Empirical)
        throw UsageError(
            "--kind empirical needs the data's labels, and images carry none: use "
            "--kind true (labels drawn from the model's own predictions)");
    inputs_.emplace(analysis::load_inputs(*m_,
                                          {.data = o_.data,
                                           .text_column = o_.text_column,
                                           .max_tokens = o_.max_tokens,
                                           .over_context = start_.over_context,
                                           .samples = o_.samples,
                                           .seed = o_.seed},
                                          start_.bos));
    print_note(inputs_->truncation_note());
    print_warning(inputs_->samples_note("--samples"));
    // What the loss of each sample predicts (decoders: next tokens; encoders: masked tokens).
    objective_ = cfg.is_vision() ? "image class" : cfg.causal ? "next token" : "masked tokens";
    if (!cfg.is_vision() && !cfg.causal) vocab_ = model::masked_lm_vocabulary(*m_);
    fingerprint_ = {{"model", fs::absolute(o_.m.model).string()},
                    {"inputs_sha256", analysis::inputs_sha256(*inputs_)},
                    {"kind", o_.kind},
                    {"draws", o_.draws},
                    {"seed", fo_.seed},
                    {"mask_rate", o_.mask_rate},
                    {"device", o_.m.device},
                    {"dtype", o_.m.dtype},
                    {"bos", o_.m.bos},
                    {"rank", comm_.rank()},
                    {"world_size", comm_.world_size()}};
    // This rank's samples: the contiguous shard [first, end) (all of them in a world of one).
    std::tie(first_, end_) =
        shard_range(int64_t(inputs_->size()), comm_.rank(), comm_.world_size());
    acc_.emplace(*m_);
    // Every rank runs the same model (whatever path it has there), data and options, or all
    // refuse before anything is written.
    if (comm_.distributed()) {
        nlohmann::json same = fingerprint_;
        same["model"] = model_identity(o_.m.model, m_->files);
        comm_.agree(same);
    }
}

// The staged folder, and the sums saved by an interrupted run when asked to resume.
void FisherRun::open_output() {
    if (o_.memory) {
        files_ = *o_.memory;
        return;
    }
    out_.emplace(OutputDir::resumable(start_.out, o_.overwrite));
    files_ = RunFiles(out_->staging());
    state_path_ = out_->file(kStateFile);
    std::optional<std::string> bytes = interrupted_state(*out_, state_path_, o_.resume, log_);
    if (!bytes) return;
    const std::string file = state_path_.string();
    const nlohmann::json state =
        io::parse_json(open_state(*bytes, state_path_, kState, fingerprint_, *out_), file);
    const bool ok = state.is_object() && state.contains("inputs_done") &&
                    state["inputs_done"].is_number_unsigned() && state.contains("inputs_skipped") &&
                    state["inputs_skipped"].is_number_unsigned();
    SS_CHECK_INPUT(ok, file, "holds no {inputs_done, inputs_skipped, sums}");
    n_done_ = state["inputs_done"].get<int64_t>();
    n_skipped_ = state["inputs_skipped"].get<int64_t>();
    SS_CHECK_INPUT(n_done_ <= end_ - first_ && n_skipped_ <= n_done_, file,
                   "holds more inputs than this run has");
    acc_->load_state(state.value("sums", nlohmann::json()), file);
    SS_CHECK_INPUT(acc_->n_samples() == n_done_ - n_skipped_, file, "damaged Fisher sums");
    log_ << "resuming at input " << first_ + n_done_ + 1 << " of " << inputs_->size() << "\n";
}

// One backward per sample (and label draw) of the shard.
void FisherRun::score() {
    const int64_t shard = end_ - first_;
    Progress bar("fisher", shard, start_.progress);
    int64_t tokens = 0;
    for (size_t k = size_t(first_ + n_done_); k < size_t(end_); ++k) {
        const model::PredictionTask task = task_of(k);
        if (!acc_->add(*m_, task, inputs_->sample_index[k], fo_)) ++n_skipped_;
        ++n_done_;
        tokens += inputs_->n_tokens(k);
        bar.update(n_done_, tokens);
        // A rank also saves its finished shard: a resume after another rank failed skips it.
        if ((n_done_ % o_.checkpoint_every == 0 && n_done_ < shard) ||
            (n_done_ == shard && comm_.distributed()))
            save_state();
        if (o_.after_sample) o_.after_sample(n_done_);
    }
    bar.finish();
}

// The ranks' sums added at rank 0 in rank order (the Fisher accumulator's merge): the same
// additions as one process makes, re-associated at the shard boundaries. False at the other
// ranks, which are done.
bool FisherRun::merge_shards() {
    if (comm_.distributed()) {
        const std::vector<std::string> shards = comm_.gather(shard_state());
        if (comm_.rank() != 0) {
            if (out_)
                end_rank(comm_, out_->staging());
            else
                comm_.finish();
            return false;
        }
        for (size_t r = 1; r < shards.size(); ++r) {
            const std::string origin = "Fisher sums of rank " + std::to_string(r);
            const nlohmann::json j = io::parse_json(shards[r], origin);
            analysis::FisherAccumulator other(*m_);
            other.load_state(j.at("sums"), origin);
            acc_->merge(other);
            n_skipped_ += j.at("inputs_skipped").get<int64_t>();
        }
    }
    if (acc_->n_samples() == 0)
        throw UsageError(
            "--data " + o_.data + " has no sample to score (" +
            (m_->config().causal ? "each needs 2 or more tokens" : "none has a maskable token") +
            ")");
    return true;
}

// The tables, run.json and the report, committed; the console summary.
std::string FisherRun::write() {
    const std::string model_name = fs::absolute(o_.m.model).filename().string();
    const analysis::FisherTables tables =
        acc_->finish(m_->config(), model_name, fo_.kind, o_.compat == "ruscio2025");
    tables.fisher.write(*files_, analysis::tables::kFisher.name);
    tables.tensors.write(*files_, analysis::tables::kFisherTensors.name);
    record(record_->json(), tables);
    record_->write(*files_);
    if (out_) {
        fs::remove(state_path_);
        report::write_report(out_->staging(), true);  // our own staging folder
        out_->commit();
    }
    comm_.finish();

    std::ostringstream s;
    s << analysis::fisher_kind_name(fo_.kind) << " Fisher over " << acc_->n_samples()
      << " samples (" << objective_ << "): total " << format_number(tables.total) << "\n";
    s << "attention share per layer:";
    for (double v : tables.attention_share) s << " " << format_number(v);
    s << "\n";
    if (n_skipped_ > 0) s << n_skipped_ << " samples had nothing to score and were skipped\n";
    log_ << s.str();
    return out_ ? out_->final_path().string() : std::string();
}

// run.json: the model, the options, the data, the objective and the definitions.
void FisherRun::record(nlohmann::json& rec, const analysis::FisherTables& tables) const {
    rec["subcommand"] = "fisher";
    rec["model"]["architecture"] = m_->config().architecture;
    rec["model"]["format"] = model::weight_format_name(m_->format);
    rec["model"]["tensor_types"] = m_->footprint.tensor_types;  // GGUF quantization types
    rec["model"]["n_params"] = m_->n_params();
    rec["device"] = o_.m.device;
    rec["dtype"] = o_.m.dtype;
    rec["bos_policy"] = tokenizer::bos_policy_name(start_.bos);
    rec["options"] = {{"kind", o_.kind},
                      {"draws", o_.draws},
                      {"seed", fo_.seed},
                      {"mask_rate", o_.mask_rate},
                      {"max_tokens", o_.max_tokens},
                      {"samples", o_.samples},
                      {"compat", o_.compat.empty() ? "principled" : o_.compat}};
    rec["data"] = {{"path", o_.data},
                   {"samples_requested", o_.samples},  // 0: every sample
                   {"n_samples", inputs_->size()},
                   {"n_scored", acc_->n_samples()},
                   {"n_skipped", n_skipped_},
                   {"n_truncated", inputs_->n_truncated},
                   {"truncated_to", inputs_->cut_length},
                   {"model_context", inputs_->context},
                   {"over_context", o_.m.over_context}};
    rec["objective"] = objective_;
    rec["distributed"] = {{"world_size", comm_.world_size()},
                          {"sharding",
                           "contiguous: rank r sums samples [N r / W, N (r + 1) / W); "
                           "rank 0 adds the sums in rank order"}};
    rec["fisher"] = {{"total", io::json_number(tables.total)}};
    nlohmann::json shares = nlohmann::json::array();
    for (double v : tables.attention_share) shares.push_back(io::json_number(v));
    rec["fisher"]["attention_share"] = shares;
    rec["definitions"] = {
        {"fisher",
         "trace of the diagonal Fisher: mean over samples of the squared gradient of the "
         "sample's mean NLL, summed over the tensor's elements"},
        {"empirical", "labels are the data's (next token; encoders: the masked tokens)"},
        {"true",
         "labels drawn from the model's own output distribution at each scored position, "
         "--draws times per sample with --seed; their squared gradients averaged"},
        {"attention_share", "F_attention / (F_attention + F_mlp) of the layer"},
        {"fisher_head",
         "the head's rows of q/k/v (a key/value head shared by g query heads counts 1/g "
         "for each) and its columns of the output projection"}};
}

std::string fisher(const FisherCommandOptions& o, Communicator& comm, std::ostream& log) {
    return FisherRun(o, comm, log).run();
}

}  // namespace

}  // namespace sinkscope::api
