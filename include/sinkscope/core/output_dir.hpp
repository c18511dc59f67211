// Output paths that never touch the user's files: a command writes its results under a temporary
// name beside the final path and moves them into place only when complete; an existing path is
// replaced only when the user asked for it (--overwrite) and only when sinkscope itself wrote it;
// of an earlier run only the files sinkscope recorded as its own (run_files.json) are replaced,
// anything the user added there is kept. Every command that writes goes through this file (one
// rule, one place).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace sinkscope {

// True when `dir` is a directory holding a run.json written by sinkscope (its "tool.name").
bool is_sinkscope_run(const std::filesystem::path& dir);

// Throws UsageError, naming `path` and how to proceed, when a run directory may not be written
// at `path`: it exists and is not a directory; or it is a non-empty directory and `overwrite`
// is false; or `overwrite` is true but the directory is not a sinkscope run (is_sinkscope_run).
// A missing path or an empty directory is always fine. Call it before any expensive work.
void check_output_dir(const std::filesystem::path& path, bool overwrite);

class OutputDir {
public:
    // Stages into a new "<final>.partial-<pid>[-n]" beside `final_path` (never an existing
    // folder). Refuses the final path up front as check_output_dir does. Missing parent folders
    // are created, and removed again if the run fails.
    OutputDir(std::filesystem::path final_path, bool overwrite);
    // Resumable runs stage into "<final>.partial" (no pid), which a later run can continue;
    // the folder is created when missing and reused only when sinkscope created it.
    static OutputDir resumable(std::filesystem::path final_path, bool overwrite);
    ~OutputDir();  // removes the staging folder (and created parents) unless commit() succeeded
    OutputDir(const OutputDir&) = delete;
    OutputDir(OutputDir&& other) noexcept;
    OutputDir& operator=(const OutputDir&) = delete;

    // Where to write files now.
    const std::filesystem::path& staging() const { return staging_; }
    std::filesystem::path file(const std::string& name) const { return staging_ / name; }
    const std::filesystem::path& final_path() const { return final_; }

    // Records every file and folder of the staging folder in kRunFilesName, then moves the
    // staged folder to the final path. An existing final folder (empty, or a sinkscope run with
    // overwrite) is swapped atomically with the new one, so at every instant the final path holds
    // either the complete old run or the complete new one. Entries of the old folder that the
    // old run did not record (the user's notes, figures, ...) are first moved into the staged
    // folder by rename, so they are in the final folder after the swap, byte for byte; then only
    // the old run's recorded files are removed. An old run without the record (an earlier
    // sinkscope's) counts as its own only the paths the new run writes. A foreign entry at a path
    // the new run writes is refused (UsageError naming it) before anything moves; a failure
    // while moving or swapping moves every entry back. If the final path no longer passes the
    // check (something was put there meanwhile), nothing is replaced. On refusal or failure the
    // staged results are kept under their temporary name (named in the error).
    void commit();
    // Keeps the staging folder when this object is destroyed without commit() (it holds the
    // state of an interrupted resumable run).
    void keep_on_failure() { keep_ = true; }

private:
    std::filesystem::path final_;
    std::filesystem::path staging_;
    std::vector<std::filesystem::path> created_parents_;  // deepest last
    bool overwrite_ = false;
    bool committed_ = false;
    bool keep_ = false;
    OutputDir() = default;
    void create_parents();
};

// The list of what sinkscope wrote in a run folder, written by OutputDir::commit beside run.json:
// {"sinkscope_run_files": 1, "files": [relative paths], "folders": [relative paths]}.
inline constexpr const char* kRunFilesName = "run_files.json";

// Adds `name`, a file directly inside the sinkscope run `run_dir`, to the run's kRunFilesName (so
// that a later --overwrite replaces it, e.g. report.html written by `report --run`). A run without
// the list (written before sinkscope kept one) is left without it.
void record_run_file(const std::filesystem::path& run_dir, const std::string& name);

// Test only: when set, called with the name of each step of an overwriting commit ("move" before
// each foreign entry is moved into the staging folder, "swap" before the swap); a hook that throws
// simulates a failure at that step. Unset (the default) in every product use.
void set_commit_fault_hook_for_testing(std::function<void(const std::string& step)> hook);

// Throws UsageError, naming the file and how to proceed, when `path` exists and may not be
// replaced: it is not a regular file, or `overwrite` is false, or `ours(path)` says sinkscope did
// not write it. Call it before any expensive work; write_output_file checks again.
void check_output_file(const std::filesystem::path& path, bool overwrite,
                       const std::function<bool(const std::filesystem::path&)>& ours);

// Writes one output file (e.g. report.html into a run directory) through a temporary file and
// rename, after check_output_file.
void write_output_file(const std::filesystem::path& path, const std::string& content,
                       bool overwrite,
                       const std::function<bool(const std::filesystem::path&)>& ours);

// Writes `content` to `path` through a temporary file and rename, so readers never see a
// partly written file (files inside a staging folder, checkpoints of long runs).
void write_file_atomic(const std::filesystem::path& path, const std::string& content);
// The same for content produced in pieces: `next(buffer)` is called with an emptied buffer until
// it returns false, and each piece is written before the next is made, so a file of hundreds of
// megabytes never needs to be held whole.
void write_file_atomic(const std::filesystem::path& path,
                       const std::function<bool(std::string& buffer)>& next);

// Reads a whole file; throws IoError naming the file when it cannot.
std::string read_file(const std::filesystem::path& path);

}  // namespace sinkscope
