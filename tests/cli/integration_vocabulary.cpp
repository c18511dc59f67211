// One vocabulary across commands (apps/vocabulary.hpp, docs/user_guide.md "Commands"): walks
// every command's --help and checks that an option several commands share has one help text and
// one default everywhere, apart from the differences listed here with their reason, that
// --out defaults to runs/<command>, and that the commands that read samples offer the same
// sample options.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testing.hpp"

using namespace sinkscope;

namespace {

struct Shown {
    std::string spec;  // type, default and REQUIRED as --help shows them ("INT=0")
    std::string text;
};
using Options = std::map<std::string, Shown>;  // flag -> what --help shows

std::vector<std::string> subcommands() {
    const auto r = testutil::run_cli({"--help"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> out;
    std::istringstream in(r.out);
    std::string line;
    bool in_list = false;
    const std::regex entry(R"(^  ([a-z][a-z0-9]*)\s)");
    while (std::getline(in, line)) {
        if (line.rfind("Subcommands:", 0) == 0) in_list = true;
        std::smatch m;
        if (in_list && std::regex_search(line, m, entry)) out.push_back(m[1]);
    }
    return out;
}

// The options of `command --help`: a line "  --flag SPEC  text" (the text may wrap onto lines
// indented further, or start on the next line when the flag column is full).
Options options_of(const std::string& command) {
    const auto r = testutil::run_cli({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    Options out;
    std::istringstream in(r.out);
    std::string line, current;
    const std::regex head(R"(^  (?:-\w,)?(--[\w-]+)(.*)$)");
    while (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_match(line, m, head)) {
            current = m[1];
            const std::string rest = m[2];
            const size_t gap = rest.find("  ");
            std::string spec = rest.substr(0, gap), text;
            if (gap != std::string::npos) text = rest.substr(rest.find_first_not_of(' ', gap));
            spec.erase(0, spec.find_first_not_of(' '));
            out[current] = {spec, text};
        } else if (!current.empty() && line.rfind("          ", 0) == 0) {
            std::string more = line.substr(line.find_first_not_of(' '));
            std::string& text = out[current].text;
            text += (text.empty() ? "" : " ") + more;
        } else {
            current.clear();
        }
    }
    return out;
}

// The default as shown ("INT=128" -> "128", "TEXT REQUIRED" -> "REQUIRED", "UINT" -> "").
std::string shown_default(const std::string& spec) {
    if (spec.find("REQUIRED") != std::string::npos) return "REQUIRED";
    const size_t eq = spec.find('=');
    return eq == std::string::npos ? "" : spec.substr(eq + 1);
}

// Shared flags whose text differs by command, and why.
const std::map<std::string, std::set<std::string>> kOwnText = {
    // metrics reads an attention file, so it lists the analyses that need no model.
    {"--analyses", {"metrics"}},
    // The unit saved differs: inputs, samples, steps.
    {"--checkpoint-every", {"fisher", "train"}},
    // dynamics keeps each checkpoint's folder as it finishes; train stages OUT.partial.
    {"--out", {"dynamics", "train"}},
    // report replaces one file inside --run, not a folder.
    {"--overwrite", {"report"}},
    // train measures Sink_eps at position 0 only (no --sink-eps-key).
    {"--sink-eps", {"train"}},
};
// Shared flags whose default differs by command, and why.
const std::set<std::string> kOwnDefault = {
    "--checkpoint-every",  // a count of the command's own unit
    "--data",              // required, or the built-in set (analyze, dynamics)
    "--max-tokens",        // analysis memory grows with T^2; perplexity and dump do not cut
    "--out",               // runs/<command>, checked below
};

TEST(Vocabulary, EverySharedOptionReadsTheSameInEveryCommand) {
    const std::vector<std::string> commands = subcommands();
    ASSERT_GE(commands.size(), 4u);  // the torch-free commands at least
    std::map<std::string, std::map<std::string, Shown>> by_flag;  // flag -> command -> shown
    for (const std::string& c : commands)
        for (const auto& [flag, shown] : options_of(c)) by_flag[flag][c] = shown;
    ASSERT_TRUE(by_flag.count("--out"));
    for (const auto& [flag, per_command] : by_flag) {
        if (flag == "--help" || per_command.size() < 2) continue;
        const std::set<std::string> own =
            kOwnText.count(flag) ? kOwnText.at(flag) : std::set<std::string>{};
        const Shown* first = nullptr;
        std::string first_command;
        for (const auto& [command, shown] : per_command) {
            if (own.count(command)) continue;
            if (!first) {
                first = &shown, first_command = command;
                continue;
            }
            EXPECT_EQ(shown.text, first->text)
                << flag << ": " << command << " and " << first_command << " say it differently";
            if (!kOwnDefault.count(flag))
                EXPECT_EQ(shown_default(shown.spec), shown_default(first->spec))
                    << flag << ": " << command << " and " << first_command
                    << " default differently";
        }
    }
    for (const auto& [command, shown] : by_flag["--out"])
        EXPECT_EQ(shown_default(shown.spec), "runs/" + command) << command;
}

// The commands that read samples offer the same ways to choose them, under the same names; a
// command with a progress line can silence it the same way.
TEST(Vocabulary, SampleAndProgressOptionsComeTogether) {
    for (const std::string& c : subcommands()) {
        const Options o = options_of(c);
        EXPECT_FALSE(o.count("--max-samples")) << c << ": the name is --samples";
        if (o.count("--data")) {
            for (const char* flag : {"--samples", "--seed", "--max-tokens", "--text-column"})
                EXPECT_TRUE(o.count(flag)) << c << " reads --data but has no " << flag;
            EXPECT_NE(o.at("--data").spec.find("PATH(existing)"), std::string::npos) << c;
        }
        if (o.count("--progress")) EXPECT_TRUE(o.count("--quiet")) << c;
        if (o.count("--seed")) EXPECT_EQ(shown_default(o.at("--seed").spec), "") << c;
    }
}

// A path named on the command line that does not exist is a usage error (exit 2) naming the
// option, in every command.
TEST(Vocabulary, AMissingPathIsAUsageErrorEverywhere) {
    const std::set<std::string> commands = [] {
        const auto v = subcommands();
        return std::set<std::string>(v.begin(), v.end());
    }();
    const std::vector<std::vector<std::string>> cases = {
        {"analyze", "--model", "/nonexistent/m"},
        {"analyze", "--data", "/nonexistent/d.txt"},
        {"inspect", "--model", "/nonexistent/m"},
        {"perplexity", "--data", "/nonexistent/d.txt"},
        {"dump", "--data", "/nonexistent/d.txt"},
        {"fisher", "--data", "/nonexistent/d.txt"},
        {"perplexity", "--data", "x", "--tokenizer", "/nonexistent/tok.bin"},
        {"dynamics", "--checkpoints", "/nonexistent/manifest.json"},
        {"metrics", "--attention", "/nonexistent/a.npy"},
        {"report", "--run", "/nonexistent/run"},
    };
    for (const auto& args : cases) {
        if (!commands.count(args[0])) continue;  // built without the model runtime
        const auto r = testutil::run_cli(args);
        EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1] << ": " << r.err;
        EXPECT_NE(r.err.find("/nonexistent/"), std::string::npos) << r.err;
    }
}

}  // namespace
