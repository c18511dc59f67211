// `sinkscope train` end to end on a corpus the test writes (seconds: the tiny presets): the same
// seed and threads give byte-identical checkpoints, the loss falls below that of the uniform
// prediction, a killed run resumes to the files of an uninterrupted one, every checkpoint loads
// in analyze / generate / inspect, and bad input is refused with one line and nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using testutil::run_cli;
using testutil::snapshot_tree;

namespace {

std::vector<std::string> train_args(const std::string& preset, const fs::path& text,
                                    const fs::path& out) {
    return {"train",      "--preset",  preset, "--text",     text.string(), "--out",
            out.string(), "--threads", "1",    "--progress", "never"};
}

// Every file of a finished run that must not depend on timing (train.log and run.json hold
// speeds and wall times).
std::map<std::string, std::string> results(const fs::path& dir) {
    auto t = snapshot_tree(dir);
    t.erase("train.log");
    t.erase("run.json");
    return t;
}

}  // namespace

TEST(CliTrain, SameSeedGivesIdenticalCheckpointsAndLossFalls) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path text = testutil::write_training_corpus(tmp.path());
    const auto a = run_cli(train_args("tiny", text, tmp / "a"));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const auto b = run_cli(train_args("tiny", text, tmp / "b"));
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const auto ra = results(tmp / "a");
    EXPECT_EQ(ra, results(tmp / "b"));
    for (const char* f :
         {"model.safetensors", "config.json", "tokenizer.json", "manifest.json", "manifest.csv",
          "checkpoints/step_000010/model.safetensors", "checkpoints/step_000030/model.safetensors"})
        EXPECT_TRUE(ra.count(f)) << f;
    // The last checkpoint is the model at the top level.
    EXPECT_EQ(ra.at("model.safetensors"), ra.at("checkpoints/step_000030/model.safetensors"));

    auto other = train_args("tiny", text, tmp / "c");
    for (const char* x : {"--seed", "2"}) other.push_back(x);
    ASSERT_EQ(run_cli(other).exit_code, 0);
    EXPECT_NE(ra.at("model.safetensors"), read_file(tmp / "c" / "model.safetensors"));

    // Loss: starts near ln(257) (the initial weights predict nearly uniformly over the 257 ids)
    // and ends far below it; each checkpoint's mean loss is below the previous one.
    const nlohmann::json m = nlohmann::json::parse(read_file(tmp / "a" / "manifest.json"));
    const auto& cps = m.at("checkpoints");
    ASSERT_EQ(cps.size(), 3u);
    const double uniform = std::log(257.0);
    EXPECT_LT(cps[0]["loss"].get<double>(), uniform + 0.1);
    for (size_t i = 1; i < cps.size(); ++i)
        EXPECT_LT(cps[i]["loss"].get<double>(), cps[i - 1]["loss"].get<double>()) << i;
    EXPECT_LT(cps.back()["loss"].get<double>(), 0.75 * uniform);
    EXPECT_EQ(cps.back()["tokens"].get<int64_t>(), 30 * 4 * 32);  // steps x batch x seq_len
    const double s = cps.back()["sink_eps"].get<double>();
    EXPECT_TRUE(s >= 0 && s <= 1) << s;
}

// SIGKILL at step 15 (after the checkpoint at step 10), then --resume: the files of an
// uninterrupted run, byte for byte.
TEST(CliTrain, KilledRunResumesToIdenticalWeights) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path text = testutil::write_training_corpus(tmp.path());
    ASSERT_EQ(run_cli(train_args("tiny", text, tmp / "whole")).exit_code, 0);
    auto killed_args = train_args("tiny", text, tmp / "part");
    for (const char* x : {"--debug-kill-after", "15"}) killed_args.push_back(x);
    const auto killed = run_cli(killed_args);
    ASSERT_NE(killed.exit_code, 0);
    EXPECT_FALSE(fs::exists(tmp / "part"));
    EXPECT_TRUE(fs::exists(tmp / "part.partial" / "train.state"));
    // Without --resume the interrupted state is not thrown away.
    const auto refused = run_cli(train_args("tiny", text, tmp / "part"));
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    auto resume_args = train_args("tiny", text, tmp / "part");
    resume_args.push_back("--resume");
    const auto resumed = run_cli(resume_args);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resuming at step 11 of 30"), std::string::npos) << resumed.out;
    EXPECT_EQ(results(tmp / "whole"), results(tmp / "part"));
}

// Checkpoints of both styles load in the other commands; generate continues in the corpus'
// words (after 300 steps the tiny model has learnt the two sentence templates).
TEST(CliTrain, CheckpointsLoadInOtherCommands) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path text = testutil::write_training_corpus(tmp.path());
    auto llama = train_args("tiny", text, tmp / "llama");
    for (const char* x : {"--steps", "300", "--checkpoint-every", "150"}) llama.push_back(x);
    ASSERT_EQ(run_cli(llama).exit_code, 0);
    auto gpt2 = train_args("tiny-gpt2", text, tmp / "gpt2");
    for (const char* x : {"--vocab", "300"}) gpt2.push_back(x);
    const auto g = run_cli(gpt2);
    ASSERT_EQ(g.exit_code, 0) << g.err;

    const auto gen = run_cli({"generate", "--model", (tmp / "llama").string(), "--prompt",
                              "Mia had a", "--max-new", "20", "--stop", "none"});
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    EXPECT_EQ(gen.out.rfind("Mia had a", 0), 0u) << gen.out;
    EXPECT_TRUE(gen.out.find(" liked the ") != std::string::npos ||
                gen.out.find(". Mia") != std::string::npos)
        << gen.out;

    const auto ins =
        run_cli({"inspect", "--model", (tmp / "gpt2" / "checkpoints" / "step_000020").string()});
    ASSERT_EQ(ins.exit_code, 0) << ins.err;
    EXPECT_NE(ins.out.find("gpt2"), std::string::npos);
    // --vocab 300 asks for 43 merges; this corpus has fewer pairs occurring twice or more, so
    // the vocabulary is 256 bytes + BOS + the merges learnt, as tokenizer.json lists them.
    const nlohmann::json tok = nlohmann::json::parse(read_file(tmp / "gpt2" / "tokenizer.json"));
    const size_t n_merges = tok.at("model").at("merges").size();
    EXPECT_GT(n_merges, 0u);
    EXPECT_LE(n_merges, 43u);
    EXPECT_EQ(tok.at("model").at("vocab").size(), 257 + n_merges);
    EXPECT_NE(ins.out.find("d_vocab       " + std::to_string(257 + n_merges) + "\n"),
              std::string::npos)
        << ins.out;

    for (const fs::path& model : {tmp / "llama" / "checkpoints" / "step_000150", tmp / "gpt2"}) {
        const fs::path out = tmp / ("analyze_" + model.filename().string());
        const auto r = run_cli({"analyze", "--model", model.string(), "--out", out.string(),
                                "--samples", "4", "--threads", "1", "--progress", "never"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(fs::exists(out / "report.html"));
    }
}

// Bad input: one line on stderr naming the problem, and nothing created or changed.
TEST(CliTrain, BadInputIsRefusedAndNothingIsWritten) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path text = testutil::write_training_corpus(tmp.path());
    testutil::write_text(tmp / "empty.txt", "\n \n");
    testutil::write_text(tmp / "short.txt", "Tom had a ball.\n");
    testutil::write_text(tmp / "other" / "notes.txt", "mine\n");
    const auto before = snapshot_tree(tmp.path());
    auto check = [&](const std::vector<std::string>& args, int code, const std::string& message) {
        const auto r = run_cli(args);
        EXPECT_EQ(r.exit_code, code) << r.err;
        EXPECT_EQ(r.err, "sinkscope: error: " + message + "\n");
        EXPECT_EQ(snapshot_tree(tmp.path()), before) << message;
        EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 4);
    };
    const std::string e = (tmp / "empty.txt").string(), s = (tmp / "short.txt").string();
    check(train_args("tiny", tmp / "empty.txt", tmp / "out"), 3, e + ": the corpus is empty");
    check(train_args("tiny", tmp / "short.txt", tmp / "out"), 3,
          s + ": the corpus has 16 tokens; one training sequence needs 31 (seq_len 32 with BOS)");
    check(train_args("huge", text, tmp / "out"), 2,
          "--preset: unknown preset 'huge' (known: tiny, tiny-gpt2, default)");
    const auto r = run_cli(train_args("tiny", text, tmp / "other"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find((tmp / "other").string()), std::string::npos) << r.err;
    EXPECT_EQ(snapshot_tree(tmp.path()), before);
}

// Without --model the model commands use the shipped models/default (found beside the
// executable's folder), or $SINKSCOPE_DEFAULT_MODEL when set.
TEST(CliTrain, CommandsWithoutModelUseTheDefault) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path text = testutil::write_training_corpus(tmp.path());
    ASSERT_EQ(run_cli(train_args("tiny", text, tmp / "mine")).exit_code, 0);
    ::setenv("SINKSCOPE_DEFAULT_MODEL", (tmp / "mine").c_str(), 1);
    const auto ins = run_cli({"inspect"});
    ::unsetenv("SINKSCOPE_DEFAULT_MODEL");
    ASSERT_EQ(ins.exit_code, 0) << ins.err;
    EXPECT_EQ(ins.err, "sinkscope: note: no --model: using the default model " +
                           (tmp / "mine").string() + "\n");
    EXPECT_NE(ins.out.find("d_model       32\n"), std::string::npos) << ins.out;

    const auto r = run_cli({"analyze", "--out", (tmp / "first").string(), "--samples", "8",
                            "--threads", "1", "--progress", "never"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json run = nlohmann::json::parse(read_file(tmp / "first" / "run.json"));
    const fs::path used = run["model"]["path"].get<std::string>();
    EXPECT_EQ(used.filename(), "default");
    EXPECT_EQ(used.parent_path().filename(), "models");
    EXPECT_TRUE(fs::exists(tmp / "first" / "report.html"));
    EXPECT_TRUE(fs::exists(tmp / "first" / "sink_eps.csv"));
}

// Sizes a --config asks for are bounded one by one (as n_layers is by the limit layers), and
// their product, the memory of a training step, is checked against the machine's available
// memory before anything is allocated: one line naming the config, exit 3, nothing written
// (issue 46 item 10: batch 1000000000 ran out of memory with exit 6, d_mlp 2^62 failed in libtorch
// with "Storage size calculation overflowed", exit 1).
TEST(CliTrain, ConfigSizesAreBoundedBeforeAnythingIsAllocated) {
    testutil::ScratchDir tmp;
    const fs::path text = testutil::write_training_corpus(tmp.path());
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"({"batch": 1000000000})", "key 'batch' must be in [1, 1048576], found 1000000000"},
        {R"({"d_mlp": 4611686018427387904})",
         "key 'd_mlp' must be in [1, 131072], found 4611686018427387904"},
        {R"({"d_model": 1000000, "n_heads": 4})", "key 'd_model' must be in [1, 131072]"},
        {R"({"n_layers": 100000})", "key 'n_layers' must be in [1, 1024]"},
        // Each size within its bound, the product far beyond any machine's memory (2^17 x 2^17
        // matrices: 64 GiB each, 12 of them per layer).
        {R"({"d_model": 131072, "d_mlp": 131072, "n_heads": 4})", "needs about"},
        {R"({"batch": 1048576, "seq_len": 1048576})", "more than the"},
    };
    for (const auto& [json, message] : cases) {
        SCOPED_TRACE(json);
        const fs::path config = tmp / "config.json";
        testutil::write_text(config, json);
        const auto r = run_cli({"train", "--config", config.string(), "--text", text.string(),
                                "--out", (tmp / "out").string(), "--progress", "never"});
        EXPECT_EQ(r.exit_code, 3) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.rfind("sinkscope: error: " + config.string() + ": ", 0), 0u) << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(tmp / "out")) << r.err;
        EXPECT_FALSE(fs::exists(tmp / "out.partial")) << r.err;
    }
}
