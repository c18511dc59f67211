// `sinkscope dynamics`: the same inputs through every checkpoint of a training run, one model in
// memory at a time. Each checkpoint is a complete analyze run (checkpoints/<k>_<label>/, with its
// rows' entropy parts kept), so rows are paired across checkpoints and the entropy change splits
// exactly into a sink and a content term (spec/METRICS.md section 6). Finished checkpoints are
// kept as they finish; --resume skips them and continues the interrupted one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

#include "sinkscope/api/analyze.hpp"

namespace sinkscope::api {

struct DynamicsOptions {
    std::filesystem::path manifest;  // JSON or CSV (io/manifest.hpp)
    // What every checkpoint runs: data, options, device... (`run.m.model`, `run.out`,
    // `run.checkpoint` and `run.resume` are set per checkpoint; run.out is the dynamics folder;
    // run.memory set: the whole series' files go there, nothing touches the disk).
    AnalyzeOptions run;
    bool checkpoint_reports = false;  // report.html in every checkpoint's folder too
    // Called after each checkpoint finishes (k = checkpoints done); the CLI's test-only
    // --debug-kill-after hooks in here.
    std::function<void(int64_t k)> after_checkpoint;
};

void run_dynamics(const DynamicsOptions& options, std::ostream& log);

}  // namespace sinkscope::api
