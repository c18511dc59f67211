// Writing an analysis run's results into its (staging) run directory, and naming the model of a
// finished one.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "sinkscope/analysis/pipeline.hpp"

namespace sinkscope::api {

// Writes every output's tables (<name>.csv, + .jsonl when asked), arrays (.npy) and texts at
// their relative paths under `dir` (on disk or in memory), creating subfolders as needed.
void write_outputs(const analysis::PipelineResults& results, const RunFiles& dir);

// The model a finished run (its run.json `rec`, its folder `dir`) is about, as its tables' model
// column names it: run.json model.name, else the last part of model.path, else the folder's name
// (a dynamics series names its folder). What compare and tables call a run's model.
std::string model_name(const nlohmann::json& rec, const std::filesystem::path& dir);

// The run.json of the finished run directory `dir` (named `shown` in errors): InputError when
// the folder does not exist, is no directory, has no run.json, or its run.json was not written
// by sinkscope. What compare and tables read a run by.
nlohmann::json read_run_json(const std::filesystem::path& dir, const std::string& shown);

}  // namespace sinkscope::api
