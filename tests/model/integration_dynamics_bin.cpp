// `sinkscope dynamics` on a Pythia-style revision series: one pytorch_model.bin directory per
// "step" (written by libtorch's own pickler from zoo/pythia at growing perturbation levels), named
// in a CSV manifest with labels, as a user lists Pythia revisions. The split stays exact and every
// checkpoint is analysed under its label.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bin_twin.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

using namespace sinkscope;
namespace fs = std::filesystem;

TEST(CliDynamics, PythiaStyleBinRevisions) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    std::string csv = "label,step,path\n";
    const double levels[] = {0.0, 0.02, 0.05, 0.1};
    for (int k = 0; k < 4; ++k) {
        const std::string step = std::to_string(1000 * (k + 1));
        testutil::write_bin_twin(shared / "zoo/pythia", tmp / ("rev" + step), 1, levels[k]);
        ASSERT_TRUE(fs::exists(tmp / ("rev" + step) / "pytorch_model.bin"));
        ASSERT_FALSE(fs::exists(tmp / ("rev" + step) / "model.safetensors"));
        csv += "step" + step + "," + step + ",rev" + step + "\n";
    }
    testutil::write_text(tmp / "revisions.csv", csv);
    const auto r =
        testutil::run_cli({"dynamics", "--checkpoints", (tmp / "revisions.csv").string(), "--out",
                           (tmp / "dyn").string(), "--samples", "4", "--max-tokens", "16",
                           "--threads", "1", "--progress", "never", "--no-report"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto run = nlohmann::json::parse(std::ifstream(tmp / "dyn/run.json"));
    ASSERT_EQ(run["checkpoints"].size(), 4u);
    for (int k = 0; k < 4; ++k) {
        const auto& c = run["checkpoints"][size_t(k)];
        EXPECT_EQ(c["label"], "step" + std::to_string(1000 * (k + 1)));
        EXPECT_EQ(c["step"], 1000 * (k + 1));
        const auto sub = nlohmann::json::parse(
            std::ifstream(tmp / "dyn" / c["path"].get<std::string>() / "run.json"));
        EXPECT_EQ(sub["model"]["format"], "huggingface");
        EXPECT_EQ(sub["checkpoint"], c["label"]);
        bool bin = false;
        for (const auto& f : sub["model"]["weight_files"])
            bin = bin || f["path"].get<std::string>().ends_with(".bin");
        EXPECT_TRUE(bin) << sub["model"].dump();
    }
    const io::Table split = io::Table::read_csv(tmp / "dyn/entropy_split.csv");
    const auto& cols = split.columns();
    const size_t res = size_t(std::find(cols.begin(), cols.end(), "residual") - cols.begin());
    const size_t delta =
        size_t(std::find(cols.begin(), cols.end(), "delta_entropy") - cols.begin());
    ASSERT_EQ(split.size(), 4u * 3u);  // 3 consecutive + first-last, model + 2 layers
    bool changed = false;
    for (const auto& row : split.rows()) {
        EXPECT_LE(std::abs(std::get<double>(row[res])), 1e-9);
        changed = changed || std::abs(std::get<double>(row[delta])) > 0;
    }
    EXPECT_TRUE(changed);  // the perturbations moved the attention
}
