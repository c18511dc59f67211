// Writing an analysis run's results into its (staging) run directory.
#pragma once

#include <filesystem>

#include "sinkscope/analysis/pipeline.hpp"

namespace sinkscope::api {

// Writes every output's tables (<name>.csv, + .jsonl when asked), arrays (.npy) and texts at
// their relative paths under `dir`, creating subfolders as needed.
void write_outputs(const analysis::PipelineResults& results, const std::filesystem::path& dir);

}  // namespace sinkscope::api
