// Test helpers implementation.
#include "testing.hpp"
#include "tolerance.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#ifndef SINKSCOPE_EXE
#define SINKSCOPE_EXE "sinkscope"
#endif

namespace fs = std::filesystem;

namespace sinkscope::testutil {

std::optional<fs::path> shared_dir() {
    if (const char* env = std::getenv("SINKSCOPE_SHARED"); env && *env) {
        if (fs::is_directory(env)) return fs::path(env);
    }
    return std::nullopt;
}

nlohmann::json read_json(const fs::path& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

ScratchDir::ScratchDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("sinkscope-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
}

ScratchDir::~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

static std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

CliResult run_program(const std::vector<std::string>& argv) {
    ScratchDir tmp;
    std::string cmd;
    for (const auto& a : argv) cmd.append(cmd.empty() ? "" : " ").append(shell_quote(a));
    cmd.append(" >").append(shell_quote((tmp / "out").string()));
    cmd.append(" 2>").append(shell_quote((tmp / "err").string())).append(" </dev/null");
    int status = std::system(cmd.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(tmp / "out");
    r.err = slurp(tmp / "err");
    return r;
}

std::filesystem::path cli_path() {
    return SINKSCOPE_EXE;
}

CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& launcher) {
    std::vector<std::string> argv = launcher;
    argv.push_back(SINKSCOPE_EXE);
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv);
}

std::vector<CliResult> run_cli_batch(const std::vector<std::vector<std::string>>& commands,
                                     const fs::path& logs, size_t n_processes) {
    fs::create_directories(logs);
    std::vector<CliResult> results(commands.size(), CliResult{-1, "", ""});
    std::vector<std::vector<size_t>> batches(std::max<size_t>(n_processes, 1));
    for (size_t i = 0, next = 0; i < commands.size(); ++i) {
        const bool separable = std::none_of(commands[i].begin(), commands[i].end(), [](auto& a) {
            return a.find_first_of("\t\n") != std::string::npos;
        });
        if (separable) {
            batches[next++ % batches.size()].push_back(i);
        } else {
            results[i] = run_cli(commands[i]);
        }
    }
    ::setenv("SINKSCOPE_TEST_BATCH", "1", 1);  // run_cli's sinkscope reads its argument as a batch
    std::vector<std::thread> workers;
    for (size_t p = 0; p < batches.size(); ++p) {
        if (batches[p].empty()) continue;
        workers.emplace_back([&, p] {
            const fs::path list = logs / ("batch" + std::to_string(p) + ".txt");
            {
                std::ofstream f(list);
                for (size_t i : batches[p]) {
                    f << (logs / std::to_string(i)).string();
                    for (const auto& a : commands[i]) f << '\t' << a;
                    f << '\n';
                }
            }
            const CliResult r = run_cli({list.string()});
            std::istringstream codes(r.out);
            for (size_t i : batches[p]) {
                if (!(codes >> results[i].exit_code)) break;  // -1: the batch process died
                results[i].out = slurp(logs / (std::to_string(i) + ".out"));
                results[i].err = slurp(logs / (std::to_string(i) + ".err"));
            }
        });
    }
    for (auto& w : workers) w.join();
    ::unsetenv("SINKSCOPE_TEST_BATCH");
    return results;
}

std::string status_attribute(const std::string& dom, const std::string& name) {
    std::smatch m;
    if (!std::regex_search(dom, m, std::regex("id=\"status\"[^>]*"))) return "";
    const std::string status = m.str();
    if (!std::regex_search(status, m, std::regex("data-" + name + "=\"([^\"]*)\""))) return "";
    return m[1];
}

std::string render_in_chromium(const fs::path& html, const fs::path& screenshot, int width) {
    ScratchDir profile;
    std::string base =
        "chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
        "--disable-background-networking --disable-component-update --disable-sync "
        "--virtual-time-budget=5000 --user-data-dir=" +
        shell_quote(profile.path().string());
    if (width > 0) base += " --window-size=" + std::to_string(width) + ",3000";
    std::string url = shell_quote("file://" + fs::absolute(html).string());
    fs::path dom = profile.path() / "dom.html";
    std::string cmd =
        base + " --dump-dom " + url + " >" + shell_quote(dom.string()) + " 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) return "";
    if (!screenshot.empty()) {
        std::string shot = base + " --window-size=1280,3000 --screenshot=" +
                           shell_quote(fs::absolute(screenshot).string()) + " " + url +
                           " >/dev/null 2>&1";
        if (std::system(shot.c_str()) != 0) return "";
    }
    return slurp(dom);
}

void expect_clean_report_layout(const fs::path& html, int min_figures) {
    for (int width : {1280, 700}) {
        SCOPED_TRACE(html.string() + " at " + std::to_string(width) + " px");
        const std::string dom = render_in_chromium(html, {}, width);
        ASSERT_EQ(status_attribute(dom, "done"), "1") << dom.substr(0, 2000);
        const std::string figures = status_attribute(dom, "figures");
        EXPECT_GE(std::stoi(figures.empty() ? "0" : figures), min_figures);
        EXPECT_EQ(status_attribute(dom, "drawn"), figures);
        const size_t at = dom.find("id=\"status\"");
        for (const std::string& a : kLayoutChecks)
            EXPECT_EQ(status_attribute(dom, a), "0") << a << ": " << dom.substr(at, 3000);
    }
}

std::string ids_str(const std::vector<int32_t>& ids) {
    std::ostringstream s;
    for (int32_t id : ids) s << ' ' << id;
    return s.str();
}

double rel_err(double a, double b, double floor) {
    double scale = std::max({std::abs(a), std::abs(b), floor});
    return std::abs(a - b) / scale;
}

void record_margin(const std::string& what, double observed, double tol) {
    const char* path = std::getenv("SINKSCOPE_TEST_MARGINS");
    if (!path || !*path) return;
    std::string test = "?";
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
        test = std::string(info->test_suite_name()) + "." + info->name();
    std::string w = what;
    std::replace_if(
        w.begin(), w.end(), [](char c) { return c == '\t' || c == '\n'; }, ' ');
    if (std::isnan(observed)) observed = INFINITY;
    static std::mutex mu;  // the metric tests assert from worker threads
    std::lock_guard<std::mutex> lock(mu);
    std::ofstream out(path, std::ios::app);
    out << test << '\t' << w << '\t' << observed << '\t' << tol << '\n';
}

static ::testing::AssertionResult judged(const std::string& what, double observed, double tol,
                                         const std::string& detail) {
    record_margin(what, observed, tol);
    if (observed <= tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << what << ": " << detail << " = " << observed << " exceeds the tolerance " << tol;
}

::testing::AssertionResult within_abs(const char* a_expr, const char* b_expr, const char* tol_expr,
                                      double a, double b, double tol) {
    std::ostringstream what;
    what << a_expr << " vs " << b_expr << " (tol " << tol_expr << ")";
    std::ostringstream detail;
    detail.precision(17);
    detail << "|" << a << " - " << b << "|";
    return judged(what.str(), a == b ? 0.0 : std::abs(a - b), tol, detail.str());
}

::testing::AssertionResult within_rel(const char* a_expr, const char* b_expr, const char* tol_expr,
                                      double a, double b, double tol) {
    std::ostringstream what;
    what << a_expr << " vs " << b_expr << " (relative, tol " << tol_expr << ")";
    std::ostringstream detail;
    detail.precision(17);
    detail << "relative error of " << a << " vs " << b;
    return judged(what.str(), a == b ? 0.0 : rel_err(a, b), tol, detail.str());
}

::testing::AssertionResult error_within(const char* err_expr, const char* tol_expr, double err,
                                        double tol) {
    std::ostringstream what;
    what << err_expr << " (tol " << tol_expr << ")";
    return judged(what.str(), err, tol, err_expr);
}

std::map<std::string, std::string> snapshot_tree(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (!e.is_regular_file()) continue;
        std::ifstream in(e.path(), std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        files[fs::relative(e.path(), dir).string()] = ss.str();
    }
    return files;
}

void write_text(const fs::path& file, const std::string& bytes) {
    if (file.has_parent_path()) fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << bytes;
}

fs::path write_training_corpus(const fs::path& dir) {
    const char* names[] = {"Tom", "Mia", "Ben", "Lily"};
    const char* things[] = {"ball", "cat", "kite", "box", "cake"};
    std::string s;
    for (int i = 0; i < 400; ++i) {
        const std::string n = names[i % 4], t = things[(i * 7) % 5];
        s += n + " had a " + t + ". " + n + " liked the " + t + ".\n";
    }
    write_text(dir / "corpus.txt", s);
    return dir / "corpus.txt";
}

}  // namespace sinkscope::testutil
