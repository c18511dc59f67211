// run.json's wall time is the whole run's: `train` records the time from its start, not from
// the moment its record was made after the last step.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "sinkscope/api/train.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

// Each of 10 steps sleeps 50 ms after it: the run takes at least 0.5 s of wall time whatever the
// machine's load (a sleep never ends early), and at most what the caller measured around it.
TEST(RunRecord, TrainWallTimeIsTheWholeRun) {
    testutil::ScratchDir tmp;
    api::TrainOptions o;
    o.preset = "tiny";
    o.text = testutil::write_training_corpus(tmp.path()).string();
    o.out = (tmp / "run").string();
    o.steps = 10;
    o.checkpoint_every = 5;
    o.threads = 1;
    o.progress = "never";
    constexpr auto kPause = std::chrono::milliseconds(50);
    o.after_step = [&](int64_t) { std::this_thread::sleep_for(kPause); };
    std::ostringstream log;
    const auto t0 = std::chrono::steady_clock::now();
    api::run_train(o, log);
    const double outside =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ifstream in(tmp / "run" / "run.json");
    const nlohmann::json rec = nlohmann::json::parse(in);
    const double wall = rec["wall_time_s"].get<double>();
    EXPECT_GE(wall, 10 * std::chrono::duration<double>(kPause).count());
    EXPECT_LE(wall, outside);
    EXPECT_EQ(rec["threads"], 1);
}
