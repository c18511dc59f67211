// Reading a finished run back: the numbers `compare` (across models) and `dynamics` (across
// checkpoints) put side by side. Each analysis reads its own tables (AnalysisInfo::compare_values
// and trajectory_values in its registry row); the commands iterate the rows and know no table.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sinkscope/core/run_files.hpp"
#include "sinkscope/io/table.hpp"

namespace sinkscope::analysis {

// One number of a finished run: at `layer` (-1: the model), `metric` with its `param` (a
// threshold, a convention, the metric a rate is about; "" when none).
struct RunValue {
    int64_t layer = -1;
    std::string metric, param;
    double value = 0;
};

// Appends what an analysis reads back from the run folder `dir` (on disk or in memory) to `out`
// (nothing when the run did not write its tables: the analysis was not selected).
using RunValueReader = std::function<void(const RunFiles& dir, std::vector<RunValue>& out)>;

// A table of a finished run, <dir>/<name>.csv, its cells read by column name; absent file: no
// rows. A missing column or a text where a number belongs is an InputError naming the file (and
// the line).
class RunTable {
public:
    RunTable(const RunFiles& dir, const std::string& name);
    RunTable(const std::filesystem::path& dir, const std::string& name)
        : RunTable(RunFiles(dir), name) {}
    bool present() const { return present_; }
    size_t size() const { return table_.size(); }
    std::string text(size_t row, const std::string& column) const;
    double num(size_t row, const std::string& column) const;

private:
    size_t column(const std::string& name) const;

    std::string file_;  // as errors name it
    io::Table table_{{}};
    bool present_ = false;
};

}  // namespace sinkscope::analysis
