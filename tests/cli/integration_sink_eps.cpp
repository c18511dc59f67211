// The sink_eps analysis (spec 8.q) on attention written by numpy: per-head alpha (mean attention
// to key k over the queries t >= k, averaged over inputs) and the shares of heads above eps, per
// layer and for the model, recomputed independently by /usr/bin/python3 at test time.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

// Writes attention.npy [N, L, H, T, T] (causal rows, f64) where heads get a random pull towards
// position 0, so that the shares are neither 0 nor 1, and expected.json with alpha[l][h] and
// the shares for key k and eps given on the command line.
constexpr const char* kScript = R"(
import json, sys
try:
    import numpy as np
except ImportError:
    sys.exit(77)
out, k, eps = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = np.random.default_rng(3)
N, L, H, T = 5, 3, 4, 12
A = np.zeros((N, L, H, T, T))
pull = np.exp(rng.uniform(-4, 2.5, size=(L, H)))
for n in range(N):
    for l in range(L):
        for h in range(H):
            for t in range(T):
                w = rng.uniform(0.1, 1, size=t + 1)
                w[0] *= pull[l, h]
                A[n, l, h, t, :t + 1] = w / w.sum()
np.save(out + "/attention.npy", A)
alpha = A[:, :, :, k:, k].mean(axis=3).mean(axis=0)        # [L, H]
exp = {"alpha": alpha.tolist(),
       "layer": [(alpha[l] > eps).mean() for l in range(L)],
       "model": float((alpha > eps).mean()),
       "margin": float(np.abs(alpha - eps).min())}
json.dump(exp, open(out + "/expected.json", "w"))
)";

double cell(const io::Table& t, size_t r, const std::string& col) {
    const auto& c = t.columns();
    const size_t i = size_t(std::find(c.begin(), c.end(), col) - c.begin());
    const io::Cell& v = t.rows().at(r).at(i);
    if (auto d = std::get_if<double>(&v)) return *d;
    if (auto n = std::get_if<int64_t>(&v)) return double(*n);
    return std::nan("");
}
std::string text(const io::Table& t, size_t r, const std::string& col) {
    const auto& c = t.columns();
    const size_t i = size_t(std::find(c.begin(), c.end(), col) - c.begin());
    const io::Cell& v = t.rows().at(r).at(i);
    if (auto s = std::get_if<std::string>(&v)) return *s;
    return "";
}

void check(int64_t key, double eps) {
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "make.py") << kScript;
    const int rc =
        std::system(("/usr/bin/python3 " + (tmp / "make.py").string() + " " + tmp.path().string() +
                     " " + std::to_string(key) + " " + std::to_string(eps))
                        .c_str());
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) GTEST_SKIP() << "/usr/bin/python3 without numpy";
    ASSERT_EQ(rc, 0);
    const nlohmann::json e = nlohmann::json::parse(read_file(tmp / "expected.json"));
    // The shares are compared exactly: no alpha lies within rounding of eps.
    ASSERT_GT(e["margin"].get<double>(), 1e-9);
    const auto r =
        testutil::run_cli({"metrics", "--attention", (tmp / "attention.npy").string(), "--analyses",
                           "sink_eps", "--sink-eps", std::to_string(eps), "--sink-eps-key",
                           std::to_string(key), "--out", (tmp / "run").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::Table t = io::Table::read_csv(tmp / "run" / "sink_eps.csv");
    // alpha: a mean of at most 5 x 12 values in [0, 1] (numpy sums pairwise, sinkscope in
    // order): each side is within 60 ulp of the exact mean.
    const double tol = 2 * 60 * std::numeric_limits<double>::epsilon();
    int n_alpha = 0, n_layer = 0, n_model = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        const auto l = int64_t(cell(t, i, "layer")), h = int64_t(cell(t, i, "head"));
        const double v = cell(t, i, "value");
        const std::string m = text(t, i, "metric");
        if (m == "alpha") {
            EXPECT_NEAR(v, e["alpha"][l][h].get<double>(), tol) << l << "." << h;
            ++n_alpha;
        } else if (m == "sink_eps" && l >= 0) {
            EXPECT_EQ(v, e["layer"][l].get<double>()) << l;
            ++n_layer;
        } else if (m == "sink_eps") {
            EXPECT_EQ(v, e["model"].get<double>());
            ++n_model;
        }
    }
    EXPECT_EQ(n_alpha, 3 * 4);
    EXPECT_EQ(n_layer, 3);
    EXPECT_EQ(n_model, 1);
    // A real mix: some heads above eps and some below.
    EXPECT_GT(e["model"].get<double>(), 0);
    EXPECT_LT(e["model"].get<double>(), 1);
    const nlohmann::json run = nlohmann::json::parse(read_file(tmp / "run" / "run.json"));
    EXPECT_EQ(run["sink_eps"]["value"].get<double>(), e["model"].get<double>());
}

}  // namespace

TEST(SinkEps, EqualsNumpyOnFirstPosition) {
    check(0, 0.3);
}
TEST(SinkEps, OtherKeyAndEps) {
    check(2, 0.2);
}
