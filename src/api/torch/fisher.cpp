// The fisher driver (spec section 8, Fisher): data -> one prediction task per sample (the
// model's objective) -> squared gradients summed per tensor and head (analysis/fisher.hpp) ->
// fisher.csv, fisher_tensors.csv, run.json and the report. The sums are saved in the staging
// folder every --checkpoint-every samples, so --resume continues an interrupted run with
// identical tables.
#include "sinkscope/api/fisher.hpp"

#include <cmath>
#include <iostream>
#include <sstream>

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
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/objective.hpp"
#include "sinkscope/report/report.hpp"

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

std::string fisher(const FisherCommandOptions& o, Communicator& comm, std::ostream& log) {
    // ---- options, before anything is loaded -------------------------------------------------
    if (o.data.empty()) throw UsageError("--data is required");
    if (o.out.empty()) throw UsageError("--out is required");
    analysis::FisherOptions fo;
    fo.kind = analysis::parse_fisher_kind(o.kind);
    if (o.draws < 1 || o.draws > 10000) throw UsageError("--draws must be between 1 and 10000");
    if (o.draws != 1 && fo.kind != analysis::FisherKind::True)
        throw UsageError(
            "--draws applies to --kind true (the empirical Fisher uses the data's "
            "labels once)");
    fo.draws = o.draws;
    fo.seed = o.seed;
    if (!(o.mask_rate > 0.0 && o.mask_rate < 1.0))
        throw UsageError("--mask-rate must be strictly between 0 and 1");
    if (o.max_tokens < 2) throw UsageError("--max-tokens must be >= 2");
    if (o.samples < 0) throw UsageError("--samples must be >= 0");
    if (o.checkpoint_every < 1) throw UsageError("--checkpoint-every must be >= 1");
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
    if (cfg.is_vision() && fo.kind == analysis::FisherKind::Empirical)
        throw UsageError(
            "--kind empirical needs the data's labels, and images carry none: use "
            "--kind true (labels drawn from the model's own predictions)");
    const model::MaskedLmOptions mlm{.rate = o.mask_rate, .seed = o.seed};
    const analysis::AnalysisInputs inputs = analysis::load_inputs(m,
                                                                  {.data = o.data,
                                                                   .text_column = o.text_column,
                                                                   .max_tokens = o.max_tokens,
                                                                   .over_context = over_context,
                                                                   .samples = o.samples,
                                                                   .seed = std::nullopt},
                                                                  bos);
    print_note(inputs.truncation_note());
    print_warning(inputs.samples_note("--samples"));
    // What the loss of each sample predicts (decoders: next tokens; encoders: masked tokens).
    const std::string objective = cfg.is_vision() ? "image class"
                                  : cfg.causal    ? "next token"
                                                  : "masked tokens";
    const model::MaskedLmVocabulary vocab = cfg.is_vision() || cfg.causal
                                                ? model::MaskedLmVocabulary{}
                                                : model::masked_lm_vocabulary(m);
    auto task_of = [&](size_t k) {
        if (cfg.is_vision()) {
            model::PredictionTask t;
            t.input = inputs.model_input(m, k);
            t.rows = {0};
            return t;
        }
        if (cfg.causal) return model::next_token_task(inputs.ids[k]);
        return model::masked_lm_task(inputs.ids[k], vocab, mlm, inputs.sample_index[k]);
    };

    const nlohmann::json fingerprint = {{"model", fs::absolute(o.m.model).string()},
                                        {"inputs_sha256", analysis::inputs_sha256(inputs)},
                                        {"kind", o.kind},
                                        {"draws", o.draws},
                                        {"seed", o.seed},
                                        {"mask_rate", o.mask_rate},
                                        {"device", o.m.device},
                                        {"dtype", o.m.dtype},
                                        {"bos", o.m.bos},
                                        {"rank", comm.rank()},
                                        {"world_size", comm.world_size()}};
    // This rank's samples: the contiguous shard [first, end) (all of them in a world of one).
    const auto [first, end] = shard_range(int64_t(inputs.size()), comm.rank(), comm.world_size());
    const int64_t shard = end - first;
    analysis::FisherAccumulator acc(m);
    int64_t n_done = 0, n_skipped = 0;  // inputs of the shard processed (scored or skipped)
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
        const bool ok = state.is_object() && state.contains("inputs_done") &&
                        state["inputs_done"].is_number_unsigned() &&
                        state.contains("inputs_skipped") &&
                        state["inputs_skipped"].is_number_unsigned();
        SS_CHECK_INPUT(ok, file, "holds no {inputs_done, inputs_skipped, sums}");
        n_done = state["inputs_done"].get<int64_t>();
        n_skipped = state["inputs_skipped"].get<int64_t>();
        SS_CHECK_INPUT(n_done <= shard && n_skipped <= n_done, file,
                       "holds more inputs than this run has");
        acc.load_state(state.value("sums", nlohmann::json()), file);
        SS_CHECK_INPUT(acc.n_samples() == n_done - n_skipped, file, "damaged Fisher sums");
        log << "resuming at input " << first + n_done + 1 << " of " << inputs.size() << "\n";
    }
    // The shard's sums: the state file's payload and what rank 0 gathers.
    auto shard_state = [&] {
        return nlohmann::json{
            {"inputs_done", n_done}, {"inputs_skipped", n_skipped}, {"sums", acc.state()}}
            .dump();
    };
    auto save_state = [&]() {
        write_file_atomic(state_path, seal_state(kState, fingerprint, shard_state()));
        out.keep_on_failure();  // from now on an interruption leaves something to resume
    };

    // ---- one backward per sample (and label draw) --------------------------------------------
    {
        Progress bar("fisher", shard, progress);
        int64_t tokens = 0;
        for (size_t k = size_t(first + n_done); k < size_t(end); ++k) {
            const model::PredictionTask task = task_of(k);
            if (!acc.add(m, task, inputs.sample_index[k], fo)) ++n_skipped;
            ++n_done;
            tokens += inputs.n_tokens(k);
            bar.update(n_done, tokens);
            // A rank also saves its finished shard: a resume after another rank failed skips it.
            if ((n_done % o.checkpoint_every == 0 && n_done < shard) ||
                (n_done == shard && comm.distributed()))
                save_state();
            if (o.after_sample) o.after_sample(n_done);
        }
        bar.finish();
    }
    // The ranks' sums added at rank 0 in rank order (the Fisher accumulator's merge): the same
    // additions as one process makes, re-associated at the shard boundaries.
    if (comm.distributed()) {
        const std::vector<std::string> shards = comm.gather(shard_state());
        if (comm.rank() != 0) {
            end_rank(comm, out.staging());
            return {};
        }
        for (size_t r = 1; r < shards.size(); ++r) {
            const std::string origin = "Fisher sums of rank " + std::to_string(r);
            const nlohmann::json j = io::parse_json(shards[r], origin);
            analysis::FisherAccumulator other(m);
            other.load_state(j.at("sums"), origin);
            acc.merge(other);
            n_skipped += j.at("inputs_skipped").get<int64_t>();
        }
    }
    if (acc.n_samples() == 0)
        throw UsageError(
            "--data " + o.data + " has no sample to score (" +
            (cfg.causal ? "each needs 2 or more tokens" : "none has a maskable token") + ")");

    // ---- tables, run.json -------------------------------------------------------------------
    const std::string model_name = fs::absolute(o.m.model).filename().string();
    const analysis::FisherTables tables = acc.finish(cfg, model_name, fo.kind);
    fs::remove(state_path);
    tables.fisher.write(out.staging(), analysis::tables::kFisher.name);
    tables.tensors.write(out.staging(), analysis::tables::kFisherTensors.name);

    nlohmann::json& rec = record.json();
    rec["subcommand"] = "fisher";
    rec["model"]["architecture"] = cfg.architecture;
    rec["model"]["format"] = model::weight_format_name(m.format);
    rec["model"]["n_params"] = m.n_params();
    rec["device"] = o.m.device;
    rec["dtype"] = o.m.dtype;
    rec["bos_policy"] = tokenizer::bos_policy_name(bos);
    rec["options"] = {
        {"kind", o.kind},           {"draws", o.draws},           {"seed", o.seed},
        {"mask_rate", o.mask_rate}, {"max_tokens", o.max_tokens}, {"samples", o.samples}};
    rec["data"] = {{"path", o.data},
                   {"samples_requested", o.samples},  // 0: every sample
                   {"n_samples", inputs.size()},
                   {"n_scored", acc.n_samples()},
                   {"n_skipped", n_skipped},
                   {"n_truncated", inputs.n_truncated},
                   {"truncated_to", inputs.cut_length},
                   {"model_context", inputs.context},
                   {"over_context", o.m.over_context}};
    rec["objective"] = objective;
    rec["distributed"] = {{"world_size", comm.world_size()},
                          {"sharding",
                           "contiguous: rank r sums samples [N r / W, N (r + 1) / W); "
                           "rank 0 adds the sums in rank order"}};
    rec["fisher"] = {{"total", io::json_number(tables.total)}};
    nlohmann::json shares = nlohmann::json::array();
    for (double s : tables.attention_share) shares.push_back(io::json_number(s));
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
    record.write(out.staging());
    report::write_report(out.staging(), true);  // our own staging folder
    out.commit();
    comm.finish();

    std::ostringstream s;
    s << analysis::fisher_kind_name(fo.kind) << " Fisher over " << acc.n_samples() << " samples ("
      << objective << "): total " << format_number(tables.total) << "\n";
    s << "attention share per layer:";
    for (double v : tables.attention_share) s << " " << format_number(v);
    s << "\n";
    if (n_skipped > 0) s << n_skipped << " samples had nothing to score and were skipped\n";
    log << s.str();
    return out.final_path().string();
}

}  // namespace

}  // namespace sinkscope::api
