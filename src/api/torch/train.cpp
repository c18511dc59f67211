// `train` (api/train.hpp): corpus -> tokenizer -> BOS-led sequences -> steps of model::Trainer,
// with checkpoints, a manifest, a log and a resumable state in the staging folder.
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

// Sink_eps on the first sequences: alpha per head averaged over them (spec 8.q).
std::pair<double, std::vector<double>> measure_sink(const model::Model& m, const at::Tensor& seqs,
                                                    double eps) {
    const model::ModelConfig& c = m.config();
    std::vector<double> alpha(static_cast<size_t>(c.n_layers * c.n_heads), 0.0);
    const int64_t n_in = seqs.size(0), T = seqs.size(1);
    const model::ForwardResult r = m.forward(
        seqs, model::CaptureSpec({model::hook_glob(model::HookPoint::Pattern)}).without_logits());
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const at::Tensor A = r.captured.at(model::hook_name(model::HookPoint::Pattern, l))
                                 .to(at::kDouble)
                                 .contiguous();  // [batch, heads, T, T]
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

std::string run_train(const TrainOptions& o, std::ostream& log) {
    // ---- options, before anything is read or written -----------------------------------------
    if (o.preset.empty() == o.config.empty())
        throw UsageError("train needs exactly one of --preset NAME and --config FILE");
    if (o.steps < 0) throw UsageError("--steps must be >= 0");
    if (o.checkpoint_every < 0) throw UsageError("--checkpoint-every must be >= 0");
    if (!(o.sink_eps >= 0 && o.sink_eps < 1)) throw UsageError("--sink-eps must be in [0, 1)");
    const auto progress = parse_progress_mode(o.progress);
    model::TrainConfig c =
        o.preset.empty()
            ? model::train_config_from_json(io::parse_json(read_file(o.config), o.config), o.config)
            : model::train_preset(o.preset);
    if (o.steps > 0) c.steps = o.steps;
    if (o.checkpoint_every > 0) c.checkpoint_every = o.checkpoint_every;
    if (o.vocab >= 0) c.vocab = o.vocab;
    if (c.vocab != 0 && c.vocab < 257)
        throw UsageError("--vocab must be 0 (bytes) or >= 257 (256 bytes + BOS)");
    if (static_cast<uint64_t>(c.vocab) > limit_value(Limit::VocabSize))
        throw UsageError("--vocab " + std::to_string(c.vocab) + " exceeds the limit vocab_size = " +
                         std::to_string(limit_value(Limit::VocabSize)) +
                         " (raise it with --limit vocab_size=N)");
    if (c.checkpoint_every <= 0) c.checkpoint_every = std::max<int64_t>(1, c.steps / 4);
    check_output_dir(o.out, o.overwrite);
    check_threads(o.threads);
    const int threads =
        o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    // From here the wall clock runs: run.json's wall_time_s is the whole run's, not its last step.
    io::RunRecord record(o.command_line, threads);

    // ---- corpus and tokenizer ----------------------------------------------------------------
    const std::string text = read_file_limited(o.text, Limit::DataBytes);
    SS_CHECK_INPUT(text.find_first_not_of(" \t\r\n") != std::string::npos, o.text,
                   "the corpus is empty");
    const std::vector<tokenizer::Merge> merges =
        tokenizer::train_byte_bpe(text, c.vocab > 0 ? c.vocab - 257 : 0);
    const std::string tokenizer_json = tokenizer::byte_bpe_tokenizer_json(merges);
    const int64_t vocab_size = 257 + static_cast<int64_t>(merges.size());
    const nlohmann::json hf_config = model::hf_config_json(c, vocab_size, tokenizer::kByteBpeBosId);
    // The product of the sizes against the machine's memory, before anything is allocated.
    const double need = model::train_memory_bytes(c, vocab_size);
    const int64_t available = memory_budget_bytes();  // MemAvailable or SINKSCOPE_MEMORY_LIMIT
    if (available > 0 && need > double(available)) {
        char line[320];
        std::snprintf(line, sizeof line,
                      "training this config needs about %.1f GiB (weights, gradients and AdamW "
                      "moments, and one step's activations of batch %lld x seq_len %lld), more "
                      "than the %.1f GiB of memory available: make d_model, d_mlp, n_layers, "
                      "batch or seq_len smaller",
                      need / double(1 << 30), static_cast<long long>(c.batch),
                      static_cast<long long>(c.seq_len), double(available) / double(1 << 30));
        throw InputError(o.config.empty() ? "--preset " + o.preset : o.config, line);
    }

    const nlohmann::json config_json = model::train_config_json(c);
    const nlohmann::json fingerprint = {{"config", config_json},
                                        {"corpus_sha256", sha256_hex(text)},
                                        {"seed", o.seed},
                                        {"threads", o.threads},
                                        {"sink_eps", o.sink_eps}};

    OutputDir out = OutputDir::resumable(o.out, o.overwrite);
    const fs::path state_path = out.file(kStateFile);
    std::optional<std::string> resumed;  // the state's payload
    if (std::optional<std::string> bytes = interrupted_state(out, state_path, o.resume, log))
        resumed = open_state(*bytes, state_path, kState, fingerprint, out);
    write_file_atomic(out.file("tokenizer.json"), tokenizer_json);
    const std::unique_ptr<tokenizer::Tokenizer> tok =
        tokenizer::load_hf_tokenizer(out.file("tokenizer.json"));
    const std::vector<int32_t> ids = tok->encode(text);
    // Each sequence: BOS then seq_len - 1 corpus tokens (a fixed first token, as Gu et al.
    // find sinks need); the tail that fills no sequence is not used.
    const int64_t chunk = c.seq_len - 1;
    const int64_t n_seq = static_cast<int64_t>(ids.size()) / chunk;
    SS_CHECK_INPUT(n_seq >= 1, o.text, "the corpus has ", ids.size(),
                   " tokens; one training sequence needs ", chunk, " (seq_len ", c.seq_len,
                   " with BOS)");
    at::Tensor seqs = at::empty({n_seq, c.seq_len}, at::TensorOptions().dtype(at::kLong));
    {
        auto a = seqs.accessor<int64_t, 2>();
        for (int64_t s = 0; s < n_seq; ++s) {
            a[s][0] = tokenizer::kByteBpeBosId;
            for (int64_t t = 0; t < chunk; ++t)
                a[s][t + 1] = ids[static_cast<size_t>(s * chunk + t)];
        }
    }
    const at::Tensor sink_inputs = seqs.narrow(0, 0, std::min(n_seq, kSinkInputs));

    // ---- model, optimizer, resumed state ------------------------------------------------------
    model::Trainer trainer(c, hf_config, o.seed);
    // Training alone runs libtorch's kernels on --threads threads (model.hpp): a step is one
    // batch, too coarse to split otherwise, so a checkpoint's last bits follow the thread count
    // (run.json and the resume fingerprint record it; the user guide says so). Back to one
    // thread on the way out, as every other command's forwards run.
    struct IntraOpThreads {
        explicit IntraOpThreads(int n) { model::set_intra_op_threads(n); }
        ~IntraOpThreads() { model::set_intra_op_threads(1); }
    } wide(threads);
    nlohmann::json manifest = nlohmann::json::array();
    std::vector<double> losses;  // every step's loss
    if (resumed) {
        const std::string file = state_path.string();
        const std::string& payload = *resumed;
        const size_t nl = payload.find('\n');
        SS_CHECK_INPUT(nl != std::string::npos, file, "holds no training state");
        const nlohmann::json head = io::parse_json(payload.substr(0, nl), file);
        SS_CHECK_INPUT(head.is_object() && head.contains("manifest") && head.contains("losses"),
                       file, "holds no {manifest, losses}");
        manifest = head.at("manifest");
        losses = head.at("losses").get<std::vector<double>>();
        trainer.load_state(payload.substr(nl + 1));
        SS_CHECK_INPUT(trainer.steps_done() == static_cast<int64_t>(losses.size()), file,
                       "damaged training state");
        log << "resuming at step " << trainer.steps_done() + 1 << " of " << c.steps << "\n";
    }
    write_file_atomic(out.file("train_config.json"), config_json.dump(2) + "\n");
    std::ofstream train_log(out.file("train.log"), std::ios::app);

    auto write_checkpoint = [&](const fs::path& dir) {
        fs::create_directories(dir);
        write_file_atomic(dir / "config.json", hf_config.dump(2) + "\n");
        write_file_atomic(dir / "tokenizer.json", tokenizer_json);
        write_file_atomic(dir / "model.safetensors", trainer.checkpoint_safetensors());
    };
    auto write_manifest = [&]() {
        write_file_atomic(out.file("manifest.json"),
                          nlohmann::json{{"checkpoints", manifest}}.dump(2) + "\n");
        std::ostringstream csv;
        csv << "step,tokens,loss,sink_eps,eps,path\n";
        for (const nlohmann::json& e : manifest)
            csv << e["step"].get<int64_t>() << "," << e["tokens"].get<int64_t>() << ","
                << format_number(e["loss"].get<double>()) << ","
                << format_number(e["sink_eps"].get<double>()) << "," << format_number(o.sink_eps)
                << "," << e["path"].get<std::string>() << "\n";
        write_file_atomic(out.file("manifest.csv"), csv.str());
    };

    // ---- steps --------------------------------------------------------------------------------
    BatchOrder order(static_cast<size_t>(n_seq), o.seed);
    const int64_t tokens_per_step = c.batch * c.seq_len;
    const int64_t print_every = std::max<int64_t>(1, c.steps / 50);
    const auto start = std::chrono::steady_clock::now();
    const int64_t first_step = trainer.steps_done();
    {
        Progress bar("train", c.steps, progress);
        std::vector<int64_t> rows(static_cast<size_t>(c.batch));
        while (trainer.steps_done() < c.steps) {
            const int64_t s = trainer.steps_done();
            for (int64_t b = 0; b < c.batch; ++b)
                rows[static_cast<size_t>(b)] = static_cast<int64_t>(order.at(s * c.batch + b));
            const at::Tensor batch =
                seqs.index_select(0, at::tensor(rows, at::TensorOptions().dtype(at::kLong)));
            losses.push_back(trainer.step(batch));
            const int64_t done = trainer.steps_done();
            bar.update(done, done * tokens_per_step);
            if (done % print_every == 0 || done == c.steps) {
                const double secs =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                const double rate = static_cast<double>((done - first_step) * tokens_per_step) /
                                    std::max(secs, 1e-9);
                std::ostringstream line;
                line << "step " << done << "/" << c.steps << " loss "
                     << format_number(losses.back()) << " lr "
                     << format_number(trainer.learning_rate(s)) << " tokens/s "
                     << static_cast<int64_t>(rate) << " eta "
                     << format_duration(static_cast<double>((c.steps - done) * tokens_per_step) /
                                        std::max(rate, 1e-9));
                train_log << line.str() << std::endl;
                if (!bar.enabled()) log << line.str() << "\n";
            }
            if (done % c.checkpoint_every == 0 || done == c.steps) {
                // The loss recorded is the mean over the steps since the previous checkpoint.
                const int64_t since = manifest.empty() ? 0 : manifest.back()["step"].get<int64_t>();
                double mean = 0;
                for (int64_t k = since; k < done; ++k) mean += losses[static_cast<size_t>(k)];
                mean /= static_cast<double>(done - since);
                const std::string rel = step_dir(done);
                write_checkpoint(out.file(rel));
                const auto [share, alpha] = measure_sink(trainer.model(), sink_inputs, o.sink_eps);
                manifest.push_back({{"step", done},
                                    {"tokens", done * tokens_per_step},
                                    {"loss", mean},
                                    {"sink_eps", io::json_number(share)},
                                    {"path", rel}});
                write_manifest();
                train_log << "checkpoint " << rel << " loss " << format_number(mean) << " Sink_"
                          << format_number(o.sink_eps) << " " << format_number(share) << std::endl;
                if (done < c.steps) {
                    nlohmann::json head = {{"manifest", manifest}, {"losses", losses}};
                    write_file_atomic(state_path,
                                      seal_state(kState, fingerprint,
                                                 head.dump() + "\n" + trainer.state_bytes()));
                    out.keep_on_failure();
                }
            }
            if (o.after_step) o.after_step(done);
        }
        bar.finish();
    }

    // ---- the last step at the top level, run.json ---------------------------------------------
    write_checkpoint(out.staging());
    fs::remove(state_path);
    train_log.close();
    nlohmann::json& rec = record.json();
    rec["subcommand"] = "train";
    rec["train"] = {{"config", config_json},
                    {"preset", o.preset},
                    {"corpus", o.text},
                    {"corpus_sha256", sha256_hex(text)},
                    {"corpus_tokens", ids.size()},
                    {"sequences", n_seq},
                    {"vocab_size", vocab_size},
                    {"seed", o.seed},
                    {"threads", threads},
                    {"n_params", trainer.model().n_params()},
                    {"final_loss", io::json_number(manifest.back()["loss"].get<double>())}};
    rec["definitions"] = {
        {"loss",
         "mean next-token cross-entropy (nats) over the steps since the previous checkpoint"},
        {"sink_eps",
         "share of heads whose mean attention to position 0 (over queries and the first " +
             std::to_string(sink_inputs.size(0)) +
             " sequences) exceeds eps (Gu et al. 2025; docs/metrics.md)"}};
    record.write(out.staging());
    out.commit();
    log << "trained " << c.steps << " steps (" << c.steps * tokens_per_step
        << " tokens), final loss " << format_number(manifest.back()["loss"].get<double>())
        << ", Sink_" << format_number(o.sink_eps) << " "
        << format_number(manifest.back()["sink_eps"].get<double>()) << "\n";
    return out.final_path().string();
}

}  // namespace sinkscope::api
