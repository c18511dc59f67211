// Every numeric option of every command at its edges (0, 1, -1, huge, out of range, not a
// number, NaN and infinities for floats), on a tiny zoo model and small inputs: the answer is a
// result (exit 0) or a one-line error of the user's kind (2 usage, 3 input, 4 unsupported),
// never an internal error (70), another code, a crash or a hang, and an error writes nothing.
// The options are read from each command's --help, so a new option is swept without editing
// this file. The cases run in two sinkscope processes (SINKSCOPE_TEST_BATCH, apps/main.cpp):
// loading libtorch per case would take longer than the cases themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sinkscope/core/output_dir.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

struct Case {
    std::string command;
    std::string option;
    std::string value;
    std::vector<std::string> args;
    fs::path dir;  // the case's own folder: its --out lives here, nothing else may appear on error
    int exit_code = -1;
    std::string err;
};

// Runs `cases` split over `n_processes` batch processes; fills exit_code and err.
void run_batches(std::vector<Case>& cases, const fs::path& logs, size_t n_processes) {
    std::vector<std::vector<std::string>> commands;
    for (const Case& c : cases) commands.push_back(c.args);
    const auto results = testutil::run_cli_batch(commands, logs, n_processes);
    for (size_t i = 0; i < cases.size(); ++i) {
        cases[i].exit_code = results[i].exit_code;
        cases[i].err = results[i].err;
    }
}

// "--name TYPE" of every option of a command's help whose value is a number (CLI11 prints INT,
// UINT or FLOAT, with " ..." for lists).
std::vector<std::pair<std::string, std::string>> numeric_options(const std::string& help) {
    std::vector<std::pair<std::string, std::string>> out;
    static const std::regex line(R"(^\s+(--[a-z0-9-]+)\s+(INT|UINT|FLOAT)\b)");
    std::istringstream in(help);
    std::string l;
    std::smatch m;
    while (std::getline(in, l))
        if (std::regex_search(l, m, line)) out.emplace_back(m[1], m[2]);
    return out;
}

std::vector<std::string> edge_values(const std::string& type) {
    std::vector<std::string> v = {"0", "1", "-1", "1000000000", "99999999999999999999", "abc", ""};
    if (type == "FLOAT") v = {"0", "1", "-1", "1e308", "nan", "inf", "-inf", "abc"};
    return v;
}

bool only_entries(const fs::path& dir, const std::vector<std::string>& allowed) {
    for (const auto& e : fs::directory_iterator(dir))
        if (std::find(allowed.begin(), allowed.end(), e.path().filename().string()) ==
            allowed.end())
            return false;
    return true;
}

}  // namespace

TEST(CliOptionEdges, EveryNumericOptionOfEveryCommand) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::string model = (shared / "zoo/qwen2").string();
    // A corpus for `train` (enough 32-token sequences for the tiny preset).
    std::string corpus;
    for (int i = 0; i < 200; ++i)
        corpus += "Tom had a ball. Mia liked the kite " + std::to_string(i) + ".\n";
    testutil::write_text(tmp / "corpus.txt", corpus);
    testutil::write_text(tmp / "data.txt", "The fox runs.\nA robot reads a book today.\n");
    testutil::write_text(tmp / "calib.txt", "The fox runs.\nA cat sleeps here now.\n");
    testutil::write_text(tmp / "eval.txt", "A robot reads a book today.\nRain falls.\n");
    const std::string data = (tmp / "data.txt").string();
    // A series of two checkpoints for `dynamics` (the same model at two "steps").
    testutil::write_text(
        tmp / "series.json",
        "[{\"step\": 1, \"path\": \"" + model + "\"}, {\"step\": 2, \"path\": \"" + model + "\"}]");

    // A run directory for `report` (metrics' built-in example).
    const fs::path run = tmp / "run";
    const auto made = testutil::run_cli({"metrics", "--example", "--out", run.string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;

    // Each command with what it needs; {out} is the case's output folder.
    const std::map<std::string, std::vector<std::string>> base = {
        {"analyze",
         {"--model", model, "--data", data, "--out", "{out}", "--progress", "never",
          "--no-report"}},
        {"metrics", {"--example", "--out", "{out}"}},
        {"dump", {"--model", model, "--data", data, "--out", "{out}"}},
        {"perplexity", {"--model", model, "--data", data}},
        {"generate", {"--model", model, "--prompt", "The fox"}},
        {"inspect", {"--model", model}},
        {"prune",
         {"--model", model, "--calib", (tmp / "calib.txt").string(), "--eval",
          (tmp / "eval.txt").string(), "--out", "{out}", "--progress", "never"}},
        {"fisher", {"--model", model, "--data", data, "--out", "{out}", "--progress", "never"}},
        {"report", {"--run", run.string(), "--overwrite"}},
        {"dynamics",
         {"--checkpoints", (tmp / "series.json").string(), "--data", data, "--out", "{out}",
          "--progress", "never", "--no-report"}},
        {"train",
         {"--preset", "tiny", "--text", (tmp / "corpus.txt").string(), "--out", "{out}", "--steps",
          "2", "--threads", "1", "--progress", "never"}},
    };
    // Values that are valid requests for a long run, not edges to refuse: left out of the sweep
    // (a billion optimizer steps trains for days; --steps 0, 1, -1 and overflow stay in).
    const std::set<std::pair<std::string, std::string>> long_runs = {
        {"train --steps", "1000000000"}};
    // Options that are text on the command line but hold numbers.
    const std::map<std::string, std::vector<std::pair<std::string, std::vector<std::string>>>>
        numeric_text = {
            {"analyze", {{"--sink", {"0", "1", "-1", "1000000000", "nan"}}}},
            {"dynamics", {{"--sink", {"0", "-1", "1000000000"}}}},
            {"metrics",
             {{"--sink", {"0", "-1", "1000000000"}},
              {"--zeros", {"replace:0", "replace:1", "replace:-1", "replace:nan", "replace:"}}}},
            {"perplexity",
             {{"--head-mask", {"0.0", "-1.0", "9.9", "0.99999999999999999999", "x"}}}},
            {"prune", {{"--sparsity", {"0", "1", "-1", "nan", "0.5,0.5", "1e308"}}}},
        };
    const std::vector<std::string> limits = {"json_bytes=0", "layers=1", "vocab_size=-1",
                                             "line_bytes=99999999999999999999"};

    // The help texts, in one batch.
    std::vector<Case> help;
    for (const auto& [command, args] : base)
        help.push_back({command, "", "", {command, "--help"}, tmp.path()});
    run_batches(help, tmp / "help", 1);

    std::vector<Case> cases;
    auto add = [&](const std::string& command, const std::string& option,
                   const std::string& value) {
        Case c{command, option, value, {command}, tmp / ("case" + std::to_string(cases.size()))};
        fs::create_directories(c.dir);
        for (const std::string& a : base.at(command))
            c.args.push_back(a == "{out}" ? (c.dir / "out").string() : a);
        c.args.insert(c.args.end(), {option, value});
        cases.push_back(std::move(c));
    };
    for (size_t k = 0; k < help.size(); ++k) {
        const std::string& command = help[k].command;
        const std::string text = read_file(tmp / "help" / (std::to_string(k) + ".out"));
        const auto options = numeric_options(text);
        if (command != "report") EXPECT_FALSE(options.empty()) << command << ":\n" << text;
        for (const auto& [option, type] : options)
            for (const std::string& v : edge_values(type))
                if (!long_runs.count({command + " " + option, v})) add(command, option, v);
        if (numeric_text.count(command))
            for (const auto& [option, values] : numeric_text.at(command))
                for (const std::string& v : values) add(command, option, v);
        for (const std::string& v : limits) add(command, "--limit", v);
    }
    const auto report_before = testutil::snapshot_tree(run);
    run_batches(cases, tmp / "logs", 2);

    for (const Case& c : cases) {
        const std::string what = c.command + " " + c.option + " '" + c.value + "'";
        const bool user_kind =
            c.exit_code == 0 || c.exit_code == 2 || c.exit_code == 3 || c.exit_code == 4;
        EXPECT_TRUE(user_kind) << what << ": exit " << c.exit_code << ": " << c.err;
        if (c.exit_code == 0) continue;
        // One error line, after any notes printed before the error arose.
        std::istringstream lines(c.err);
        std::vector<std::string> err;
        for (std::string l; std::getline(lines, l);) err.push_back(l);
        ASSERT_FALSE(err.empty()) << what;
        EXPECT_EQ(err.back().rfind("sinkscope: error: ", 0), 0u) << what << ": " << c.err;
        for (size_t i = 0; i + 1 < err.size(); ++i)
            EXPECT_EQ(err[i].rfind("sinkscope: note: ", 0), 0u) << what << ": " << c.err;
        EXPECT_TRUE(only_entries(c.dir, {})) << what << ": wrote into " << c.dir;
    }
    // report's errors leave the run as it was (a successful re-render replaces report.html).
    auto after = testutil::snapshot_tree(run);
    after.erase("report.html");
    auto before = report_before;
    before.erase("report.html");
    EXPECT_EQ(after, before);
}
