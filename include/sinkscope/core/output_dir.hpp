// Output directories that appear whole or not at all: results are staged in a sibling
// folder and renamed into place on commit(); a failed or interrupted run leaves nothing.
#pragma once

#include <filesystem>
#include <string>

namespace sinkscope {

class OutputDir {
public:
    // Stages into "<final>.partial-<pid>" beside `final_path`.
    explicit OutputDir(std::filesystem::path final_path);
    // Resumable runs stage into "<final>.partial" (no pid), which a later run can continue;
    // the folder is created when missing and kept when it exists.
    static OutputDir resumable(std::filesystem::path final_path);
    ~OutputDir();  // removes the staging folder unless commit() succeeded
    OutputDir(const OutputDir&) = delete;
    OutputDir(OutputDir&& other) noexcept
        : final_(std::move(other.final_)),
          staging_(std::move(other.staging_)),
          committed_(other.committed_),
          keep_(other.keep_) {
        other.staging_.clear();
    }
    OutputDir& operator=(const OutputDir&) = delete;

    // Where to write files now.
    const std::filesystem::path& staging() const { return staging_; }
    std::filesystem::path file(const std::string& name) const { return staging_ / name; }
    const std::filesystem::path& final_path() const { return final_; }

    // Moves the staged folder to the final path, replacing an earlier result there.
    void commit();
    // Keeps the staging folder when this object is destroyed without commit() (it holds the
    // state of an interrupted resumable run).
    void keep_on_failure() { keep_ = true; }

private:
    std::filesystem::path final_;
    std::filesystem::path staging_;
    bool committed_ = false;
    bool keep_ = false;
    OutputDir() = default;
};

// Writes `content` to `path` through a temporary file and rename, so readers never see a
// partly written file (used for checkpoints of long runs).
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

// Reads a whole file; throws IoError naming the file when it cannot.
std::string read_file(const std::filesystem::path& path);

}  // namespace sinkscope
