// `train` (api/train.hpp): corpus -> tokenizer -> BOS-led sequences (or, with bos = false,
// sequences of corpus tokens only) -> steps of model::Trainer, with checkpoints, a manifest, a log
// and a resumable state in the staging folder.
#include "sinkscope/api/train.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "sinkscope/api/resumable.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/metrics/sink_eps.hpp"
#include "sinkscope/model/train.hpp"
#include "sinkscope/tokenizer/byte_bpe_trainer.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace sinkscope::api {

namespace {

constexpr StateFormat kState{"train", 1};
constexpr const char* kStateFile = "train.state";
constexpr int64_t kSinkInputs = 8;  // sequences Sink_eps is measured on at each checkpoint

// The sequence order: epoch e is a Fisher-Yates permutation of the sequences drawn with a stream
// seeded by (seed, e), so the batch of any step follows from the seed alone (resume needs no
// generator state).
class BatchOrder {
public:
    BatchOrder(size_t n, uint64_t seed) : n_(n), seed_(seed) {}
    size_t at(int64_t global) {
        const auto epoch = static_cast<uint64_t>(global) / n_;
        if (!perm_.size() || epoch != epoch_) {
            epoch_ = epoch;
            uint64_t s = seed_ ^ (0x9E3779B97F4A7C15ULL * (epoch + 1));
            Xoshiro256 rng(splitmix64(s));
            perm_.resize(n_);
            for (size_t i = 0; i < n_; ++i) perm_[i] = i;
            for (size_t i = n_; i > 1; --i) std::swap(perm_[i - 1], perm_[rng.below(i)]);
        }
        return perm_[static_cast<uint64_t>(global) % n_];
    }

private:
    size_t n_;
    uint64_t seed_;
    uint64_t epoch_ = 0;
    std::vector<size_t> perm_;
};

// Sink_eps on the first sequences: alpha per head averaged over them (spec 8.q). Rows of an
// attention function other than softmax are closed first (divided by their sum over the visible
// keys), as analyze reads them and as Gu et al.'s evaluation measures sigmoid attention.
std::pair<double, std::vector<double>> measure_sink(const model::Model& m, const at::Tensor& seqs,
                                                    double eps) {
    const model::ModelConfig& c = m.config();
    std::vector<double> alpha(static_cast<size_t>(c.n_layers * c.n_heads), 0.0);
    const int64_t n_in = seqs.size(0), T = seqs.size(1);
    const model::ForwardResult r = m.forward(
        seqs, model::CaptureSpec({model::hook_glob(model::HookPoint::Pattern)}).without_logits());
    for (int64_t l = 0; l < c.n_layers; ++l) {
        at::Tensor A = r.captured.at(model::hook_name(model::HookPoint::Pattern, l))
                           .to(at::kDouble)
                           .contiguous();  // [batch, heads, T, T]
        if (!c.rows_sum_to_one()) A = A / A.sum(-1, true);
        for (int64_t b = 0; b < n_in; ++b)
            for (int64_t h = 0; h < c.n_heads; ++h)
                alpha[static_cast<size_t>(l * c.n_heads + h)] +=
                    metrics::sink_eps_alpha(A[b][h].data_ptr<double>(), T, 0) /
                    static_cast<double>(n_in);
    }
    return {metrics::sink_eps_share(alpha, eps), alpha};
}

std::string step_dir(int64_t step) {
    std::ostringstream s;
    s << "checkpoints/step_" << std::setw(6) << std::setfill('0') << step;
    return s.str();
}

}  // namespace

namespace {

// Training alone runs libtorch's kernels on --threads threads (model.hpp): a step is one batch,
// too coarse to split otherwise, so a checkpoint's last bits follow the thread count (run.json
// and the resume fingerprint record it; the user guide says so). Back to one thread on the way
// out, as every other command's forwards run.
struct IntraOpThreads {
    explicit IntraOpThreads(int n) { model::set_intra_op_threads(n); }
    ~IntraOpThreads() { model::set_intra_op_threads(1); }
    IntraOpThreads(const IntraOpThreads&) = delete;
    IntraOpThreads& operator=(const IntraOpThreads&) = delete;
};

// A tokenizer.json whose template adds no BOS (TemplateProcessing of the sequence alone; BOS
// stays a special token), for a run trained without BOS: BosPolicy::ModelDefault then prepends
// nothing, so analyze and every other command read the model as it was trained.
std::string without_bos_template(const std::string& tokenizer_json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(tokenizer_json);
    nlohmann::ordered_json& pp = j.at("post_processor");
    pp["single"] = nlohmann::ordered_json::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});
    pp["pair"] = nlohmann::ordered_json::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                                {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}});
    return j.dump(1) + "\n";
}

// tokenizer_config.json beside it: which token is BOS (for --bos always) and that the tokenizer
// adds none by default.
std::string without_bos_tokenizer_config() {
    const nlohmann::ordered_json j = {{"bos_token", tokenizer::kBosToken},
                                      {"add_bos_token", false}};
    return j.dump(2) + "\n";
}

// One training run, step by step: the options and the configuration (check), the corpus, its
// tokenizer and the memory check (read_corpus), the staged folder with the tokenizer and the
// BOS-led (or BOS-free) sequences (open_output), the trainer and any saved state (restore), the
// steps with their checkpoints (train), and the last step with run.json (finish).
class TrainRun {
public:
    TrainRun(const TrainOptions& o, std::ostream& log) : o_(o), log_(log) {}

    std::string run() {
        check();
        read_corpus();
        open_output();
        restore();
        train();
        return finish();
    }

private:
    void check();
    void read_corpus();
    void open_output();
    void restore();
    void train();
    void checkpoint(int64_t done);
    std::string finish();
    void write_checkpoint(const fs::path& dir) const {
        fs::create_directories(dir);
        write_file_atomic(dir / "config.json", hf_config_.dump(2) + "\n");
        write_tokenizer(dir);
        write_file_atomic(dir / "model.safetensors", trainer_->checkpoint_safetensors());
    }
    void write_manifest() const;
    // "" for the defaults, else " (attention sigmoid, no BOS)".
    std::string switches() const {
        std::string s;
        if (c_.attention != model::AttentionFunction::Softmax)
            s += std::string("attention ") + model::attention_function_name(c_.attention);
        if (!c_.bos) s += std::string(s.empty() ? "" : ", ") + "no BOS";
        if (c_.kv_bias) s += std::string(s.empty() ? "" : ", ") + "kv slot";
        return s.empty() ? s : " (" + s + ")";
    }
    // tokenizer.json (and, without BOS, tokenizer_config.json) into `dir`.
    void write_tokenizer(const fs::path& dir) const {
        write_file_atomic(dir / "tokenizer.json", tokenizer_json_);
        if (!c_.bos)
            write_file_atomic(dir / "tokenizer_config.json", without_bos_tokenizer_config());
    }

    const TrainOptions& o_;
    std::ostream& log_;
    Progress::Mode progress_{};
    model::TrainConfig c_;
    int threads_ = 1;
    std::optional<io::RunRecord> record_;
    std::string text_, tokenizer_json_;
    int64_t vocab_size_ = 0;
    nlohmann::json hf_config_, config_json_, fingerprint_;
    std::optional<OutputDir> out_;
    fs::path state_path_;
    std::optional<std::string> resumed_;  // the saved state's payload
    size_t n_corpus_tokens_ = 0;
    int64_t n_seq_ = 0;
    at::Tensor seqs_, sink_inputs_;
    std::optional<model::Trainer> trainer_;
    std::optional<IntraOpThreads> wide_;
    nlohmann::json manifest_ = nlohmann::json::array();
    std::vector<double> losses_;  // every step's loss
    std::ofstream train_log_;
};

// The options and the configuration, before anything is read or written.
void TrainRun::check() {
    if (o_.preset.empty() == o_.config.empty())
        throw UsageError("train needs exactly one of --preset NAME and --config FILE");
    if (o_.steps < 0) throw UsageError("--steps must be >= 0");
    if (o_.checkpoint_every < 0) throw UsageError("--checkpoint-every must be >= 0");
    if (!(o_.sink_eps >= 0 && o_.sink_eps < 1)) throw UsageError("--sink-eps must be in [0, 1)");
    progress_ = parse_progress_mode(o_.progress);
    c_ = o_.preset.empty() ? model::train_config_from_json(
                                 io::parse_json(read_file(o_.config), o_.config), o_.config)
                           : model::train_preset(o_.preset);
    if (o_.steps > 0) c_.steps = o_.steps;
    if (o_.checkpoint_every > 0) c_.checkpoint_every = o_.checkpoint_every;
    if (o_.vocab >= 0) c_.vocab = o_.vocab;
    if (!o_.attention_function.empty()) {
        const std::optional<model::AttentionFunction> f =
            model::attention_function_from_name(o_.attention_function);
        if (!f)
            throw UsageError("--attention-function " + quote(o_.attention_function) +
                             " is not one of " + model::kAttentionFunctionNames);
        c_.attention = *f;
    }
    if (o_.no_bos) c_.bos = false;
    if (o_.kv_bias) c_.kv_bias = true;
    if (c_.kv_bias && c_.attention != model::AttentionFunction::Softmax)
        throw UsageError(std::string("--kv-bias needs softmax attention, not ") +
                         model::attention_function_name(c_.attention));
    if (c_.vocab != 0 && c_.vocab < 257)
        throw UsageError("--vocab must be 0 (bytes) or >= 257 (256 bytes + BOS)");
    if (static_cast<uint64_t>(c_.vocab) > limit_value(Limit::VocabSize))
        throw UsageError(
            "--vocab " + std::to_string(c_.vocab) +
            " exceeds the limit vocab_size = " + std::to_string(limit_value(Limit::VocabSize)) +
            " (raise it with --limit vocab_size=N)");
    if (c_.checkpoint_every <= 0) c_.checkpoint_every = std::max<int64_t>(1, c_.steps / 4);
    check_output_dir(o_.out, o_.overwrite);
    check_threads(o_.threads);
    threads_ = o_.threads > 0 ? o_.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    // From here the wall clock runs: run.json's wall_time_s is the whole run's, not its last step.
    record_.emplace(o_.command_line, threads_);
}

// The corpus, its byte-level BPE tokenizer, the model's config.json, and the memory the
// configuration needs against the machine's.
void TrainRun::read_corpus() {
    text_ = read_file_limited(o_.text, Limit::DataBytes);
    SS_CHECK_INPUT(text_.find_first_not_of(" \t\r\n") != std::string::npos, o_.text,
                   "the corpus is empty");
    const std::vector<tokenizer::Merge> merges =
        tokenizer::train_byte_bpe(text_, c_.vocab > 0 ? c_.vocab - 257 : 0);
    tokenizer_json_ = tokenizer::byte_bpe_tokenizer_json(merges);
    if (!c_.bos) tokenizer_json_ = without_bos_template(tokenizer_json_);
    vocab_size_ = 257 + static_cast<int64_t>(merges.size());
    hf_config_ = model::hf_config_json(c_, vocab_size_, tokenizer::kByteBpeBosId);
    // The product of the sizes against the machine's memory, before anything is allocated.
    const double need = model::train_memory_bytes(c_, vocab_size_);
    const int64_t available = memory_budget_bytes();  // MemAvailable or SINKSCOPE_MEMORY_LIMIT
    if (available > 0 && need > double(available)) {
        char line[320];
        std::snprintf(line, sizeof line,
                      "training this config needs about %.1f GiB (weights, gradients and AdamW "
                      "moments, and one step's activations of batch %lld x seq_len %lld), more "
                      "than the %.1f GiB of memory available: make d_model, d_mlp, n_layers, "
                      "batch or seq_len smaller",
                      need / double(1 << 30), static_cast<long long>(c_.batch),
                      static_cast<long long>(c_.seq_len), double(available) / double(1 << 30));
        throw InputError(o_.config.empty() ? "--preset " + o_.preset : o_.config, line);
    }
    config_json_ = model::train_config_json(c_);
    fingerprint_ = {{"config", config_json_},
                    {"corpus_sha256", sha256_hex(text_)},
                    {"seed", o_.seed},
                    {"threads", o_.threads},
                    {"sink_eps", o_.sink_eps}};
}

// The staged folder (and any saved state), the tokenizer in it, and the corpus as BOS-led
// sequences (without BOS: seq_len corpus tokens each).
void TrainRun::open_output() {
    out_.emplace(OutputDir::resumable(o_.out, o_.overwrite));
    state_path_ = out_->file(kStateFile);
    if (std::optional<std::string> bytes = interrupted_state(*out_, state_path_, o_.resume, log_))
        resumed_ = open_state(*bytes, state_path_, kState, fingerprint_, *out_);
    write_tokenizer(out_->staging());
    const std::unique_ptr<tokenizer::Tokenizer> tok =
        tokenizer::load_hf_tokenizer(out_->file("tokenizer.json"));
    const std::vector<int32_t> ids = tok->encode(text_);
    n_corpus_tokens_ = ids.size();
    // Each sequence: BOS then seq_len - 1 corpus tokens (a fixed first token, as Gu et al.
    // find sinks need), or without BOS seq_len corpus tokens (the first one wherever the packing
    // cuts the corpus); the tail that fills no sequence is not used.
    seqs_ = model::pack_sequences(ids, c_.seq_len, c_.bos ? tokenizer::kByteBpeBosId : -1);
    n_seq_ = seqs_.size(0);
    SS_CHECK_INPUT(n_seq_ >= 1, o_.text, "the corpus has ", ids.size(),
                   " tokens; one training sequence needs ", c_.bos ? c_.seq_len - 1 : c_.seq_len,
                   " (seq_len ", c_.seq_len, c_.bos ? " with BOS)" : " without BOS)");
    sink_inputs_ = seqs_.narrow(0, 0, std::min(n_seq_, kSinkInputs));
}

// The model and optimizer, and the saved state of an interrupted run when resuming.
void TrainRun::restore() {
    trainer_.emplace(c_, hf_config_, o_.seed);
    wide_.emplace(threads_);
    if (resumed_) {
        const std::string file = state_path_.string();
        const std::string& payload = *resumed_;
        const size_t nl = payload.find('\n');
        SS_CHECK_INPUT(nl != std::string::npos, file, "holds no training state");
        const nlohmann::json head = io::parse_json(payload.substr(0, nl), file);
        SS_CHECK_INPUT(head.is_object() && head.contains("manifest") && head.contains("losses"),
                       file, "holds no {manifest, losses}");
        manifest_ = head.at("manifest");
        losses_ = head.at("losses").get<std::vector<double>>();
        trainer_->load_state(payload.substr(nl + 1));
        SS_CHECK_INPUT(trainer_->steps_done() == static_cast<int64_t>(losses_.size()), file,
                       "damaged training state");
        log_ << "resuming at step " << trainer_->steps_done() + 1 << " of " << c_.steps << "\n";
    }
    write_file_atomic(out_->file("train_config.json"), config_json_.dump(2) + "\n");
    train_log_.open(out_->file("train.log"), std::ios::app);
}

void TrainRun::write_manifest() const {
    write_file_atomic(out_->file("manifest.json"),
                      nlohmann::json{{"checkpoints", manifest_}}.dump(2) + "\n");
    std::ostringstream csv;
    csv << "step,tokens,loss,sink_eps,eps,path\n";
    for (const nlohmann::json& e : manifest_)
        csv << e["step"].get<int64_t>() << "," << e["tokens"].get<int64_t>() << ","
            << format_number(e["loss"].get<double>()) << ","
            << format_number(e["sink_eps"].get<double>()) << "," << format_number(o_.sink_eps)
            << "," << e["path"].get<std::string>() << "\n";
    write_file_atomic(out_->file("manifest.csv"), csv.str());
}

// The steps left, a progress line every 1/50 of the run, a checkpoint every checkpoint_every.
void TrainRun::train() {
    BatchOrder order(static_cast<size_t>(n_seq_), o_.seed);
    const int64_t tokens_per_step = c_.batch * c_.seq_len;
    const int64_t print_every = std::max<int64_t>(1, c_.steps / 50);
    const auto start = std::chrono::steady_clock::now();
    const int64_t first_step = trainer_->steps_done();
    Progress bar("train", c_.steps, progress_);
    std::vector<int64_t> rows(static_cast<size_t>(c_.batch));
    while (trainer_->steps_done() < c_.steps) {
        const int64_t s = trainer_->steps_done();
        for (int64_t b = 0; b < c_.batch; ++b)
            rows[static_cast<size_t>(b)] = static_cast<int64_t>(order.at(s * c_.batch + b));
        const at::Tensor batch =
            seqs_.index_select(0, at::tensor(rows, at::TensorOptions().dtype(at::kLong)));
        losses_.push_back(trainer_->step(batch));
        const int64_t done = trainer_->steps_done();
        bar.update(done, done * tokens_per_step);
        if (done % print_every == 0 || done == c_.steps) {
            const double secs =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            const double rate =
                static_cast<double>((done - first_step) * tokens_per_step) / std::max(secs, 1e-9);
            std::ostringstream line;
            line << "step " << done << "/" << c_.steps << " loss " << format_number(losses_.back())
                 << " lr " << format_number(trainer_->learning_rate(s)) << " tokens/s "
                 << static_cast<int64_t>(rate) << " eta "
                 << format_duration(static_cast<double>((c_.steps - done) * tokens_per_step) /
                                    std::max(rate, 1e-9));
            train_log_ << line.str() << std::endl;
            if (!bar.enabled()) log_ << line.str() << "\n";
        }
        if (done % c_.checkpoint_every == 0 || done == c_.steps) checkpoint(done);
        if (o_.after_step) o_.after_step(done);
    }
    bar.finish();
}

// The checkpoint after step `done`: its folder, Sink_eps, the manifest and the resumable state.
void TrainRun::checkpoint(int64_t done) {
    // The loss recorded is the mean over the steps since the previous checkpoint.
    const int64_t since = manifest_.empty() ? 0 : manifest_.back()["step"].get<int64_t>();
    double mean = 0;
    for (int64_t k = since; k < done; ++k) mean += losses_[static_cast<size_t>(k)];
    mean /= static_cast<double>(done - since);
    const std::string rel = step_dir(done);
    write_checkpoint(out_->file(rel));
    const auto [share, alpha] = measure_sink(trainer_->model(), sink_inputs_, o_.sink_eps);
    manifest_.push_back({{"step", done},
                         {"tokens", done * c_.batch * c_.seq_len},
                         {"loss", mean},
                         {"sink_eps", io::json_number(share)},
                         {"path", rel}});
    write_manifest();
    train_log_ << "checkpoint " << rel << " loss " << format_number(mean) << " Sink_"
               << format_number(o_.sink_eps) << " " << format_number(share) << std::endl;
    if (done < c_.steps) {
        nlohmann::json head = {{"manifest", manifest_}, {"losses", losses_}};
        write_file_atomic(state_path_, seal_state(kState, fingerprint_,
                                                  head.dump() + "\n" + trainer_->state_bytes()));
        out_->keep_on_failure();
    }
}

// The last step at the top level, run.json, committed.
std::string TrainRun::finish() {
    write_checkpoint(out_->staging());
    fs::remove(state_path_);
    train_log_.close();
    nlohmann::json& rec = record_->json();
    rec["subcommand"] = "train";
    rec["train"] = {{"config", config_json_},
                    {"preset", o_.preset},
                    {"corpus", o_.text},
                    {"corpus_sha256", sha256_hex(text_)},
                    {"corpus_tokens", n_corpus_tokens_},
                    {"sequences", n_seq_},
                    {"vocab_size", vocab_size_},
                    {"seed", o_.seed},
                    {"threads", threads_},
                    {"n_params", trainer_->model().n_params()},
                    {"final_loss", io::json_number(manifest_.back()["loss"].get<double>())},
                    {"attention", model::attention_function_name(c_.attention)},
                    {"bos", c_.bos},
                    {"kv_bias", c_.kv_bias}};
    rec["definitions"] = {
        {"loss",
         "mean next-token cross-entropy (nats) over the steps since the previous checkpoint"},
        {"sink_eps",
         "share of heads whose mean attention to position 0 (over queries and the first " +
             std::to_string(sink_inputs_.size(0)) +
             " sequences) exceeds eps (Gu et al. 2025; docs/metrics.md)" +
             (c_.attention == model::AttentionFunction::Softmax
                  ? std::string()
                  : std::string("; the ") + model::attention_function_name(c_.attention) +
                        " rows are closed first (each divided by its sum over the visible "
                        "keys), as Gu et al.'s evaluation reads them") +
             (c_.kv_bias ? std::string("; the rows are closed first (each divided by its sum "
                                       "over the tokens, the kv slot's weight left out)")
                         : std::string())},
        {"bos", c_.bos ? "each sequence is BOS and seq_len - 1 corpus tokens"
                       : "each sequence is seq_len corpus tokens, no BOS (the tokenizer written "
                         "adds none by default)"}};
    record_->write(out_->staging());
    out_->commit();
    log_ << "trained " << c_.steps << " steps (" << c_.steps * c_.batch * c_.seq_len
         << " tokens), final loss " << format_number(manifest_.back()["loss"].get<double>())
         << ", Sink_" << format_number(o_.sink_eps) << " "
         << format_number(manifest_.back()["sink_eps"].get<double>()) << switches() << "\n";
    return out_->final_path().string();
}

}  // namespace

std::string run_train(const TrainOptions& o, std::ostream& log) {
    return TrainRun(o, log).run();
}

}  // namespace sinkscope::api
