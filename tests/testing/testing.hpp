// Helpers shared by the test suites: ../shared lookup, scratch folders, running the CLI.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tolerance.hpp"

namespace sinkscope::testutil {

// ../shared (or $SINKSCOPE_SHARED), when present.
std::optional<std::filesystem::path> shared_dir();

// A JSON file parsed (run.json, manifests); nlohmann's exception when it is not JSON.
nlohmann::json read_json(const std::filesystem::path& path);

// A fresh empty folder under the system temp dir, removed by the destructor.
class ScratchDir {
public:
    ScratchDir();
    ~ScratchDir();
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

struct CliResult {
    int exit_code;
    std::string out;  // stdout
    std::string err;  // stderr
};
// Runs the built sinkscope executable with `args` (each one shell-quoted), after `launcher`
// when given (for example {"env", "-u", "NAME"}: the executable is its last argument).
CliResult run_cli(const std::vector<std::string>& args,
                  const std::vector<std::string>& launcher = {});
// Runs the program argv[0] with the other arguments (each one shell-quoted).
CliResult run_program(const std::vector<std::string>& argv);
// The built sinkscope executable (the launcher; sinkscope-main and sinkscope-lite lie beside it).
std::filesystem::path cli_path();
// Runs many command lines through `n_processes` sinkscope processes in batch mode
// (SINKSCOPE_TEST_BATCH, apps/main.cpp: each command in a forked child of one process, so
// libtorch is loaded once per process instead of once per command), in order within a process;
// the command files and each command's stdout / stderr go to `logs`. A command with a tab or a
// newline in an argument (the batch file's separators) runs on its own through run_cli.
std::vector<CliResult> run_cli_batch(const std::vector<std::vector<std::string>>& commands,
                                     const std::filesystem::path& logs, size_t n_processes = 1);

// Loads `html` in headless Chromium; returns the DOM after scripts ran (virtual time budget) and,
// when `screenshot` is not empty, saves a PNG of the page there.
// `width`: the window's width in CSS pixels (0: Chromium's default).
std::string render_in_chromium(const std::filesystem::path& html,
                               const std::filesystem::path& screenshot = {}, int width = 0);
// The layout checks report.html's own script makes on its drawn figures (src/report/html.cpp):
// each data-<name> counts the problems of one kind.
inline const std::vector<std::string> kLayoutChecks = {
    "errors",         "empty-panels", "untitled-axes",     "layer-ticks",
    "clipped-labels", "layer-lines",  "overlapping-labels"};
// Renders `html` at a wide and a narrow window (1280 and 700 px) and expects every figure drawn,
// at least `min_figures` of them, and no layout problem (kLayoutChecks) at either width.
void expect_clean_report_layout(const std::filesystem::path& html, int min_figures);
// The data-<name> attribute of report.html's status element in a DOM from render_in_chromium
// (what the page's own scripts wrote there), or "" when absent.
std::string status_attribute(const std::string& dom, const std::string& name);

// Token ids as " 1 2 3" (one leading space each), for failure messages and id comparisons.
std::string ids_str(const std::vector<int32_t>& ids);

// Relative error |a - b| / max(|a|, |b|, floor).
double rel_err(double a, double b, double floor = 1e-300);

// Every regular file under `dir` (path relative to `dir` -> bytes): two snapshots are equal
// when the tree is unchanged byte for byte.
std::map<std::string, std::string> snapshot_tree(const std::filesystem::path& dir);

// Writes `bytes` to `file`, creating its parent folders.
void write_text(const std::filesystem::path& file, const std::string& bytes);

// A small repetitive corpus (about 40 KB, <dir>/corpus.txt, returned): enough sequences of 32
// bytes for every `sinkscope train --preset tiny` run of the tests.
std::filesystem::path write_training_corpus(const std::filesystem::path& dir);

}  // namespace sinkscope::testutil

// Skips the test with a clear message when ../shared is absent; binds `var` to its path.
#define SINKSCOPE_REQUIRE_SHARED(var)                                                           \
    auto var##_opt = ::sinkscope::testutil::shared_dir();                                       \
    if (!var##_opt) GTEST_SKIP() << "../shared test material not found (set SINKSCOPE_SHARED)"; \
    const std::filesystem::path var = *var##_opt

// Skips the test with a clear message in a build without the model runtime (configured with
// -DSINKSCOPE_WITH_TORCH=OFF): its model commands (analyze, dump, train, ...) do not exist there.
#ifdef SINKSCOPE_TESTS_WITH_MODEL_RUNTIME
#define SINKSCOPE_REQUIRE_MODEL_RUNTIME() static_cast<void>(0)
#else
#define SINKSCOPE_REQUIRE_MODEL_RUNTIME() \
    GTEST_SKIP() << "this build has no model runtime (configured with -DSINKSCOPE_WITH_TORCH=OFF)"
#endif
