// The files of a run as a command writes them and reads them back: under a folder on disk (an
// OutputDir's staging folder) or in memory, where nothing touches the disk (the Python bindings
// without `out=`). Paths are relative to the run's folder, '/'-separated. A RunFiles is a handle:
// copies and sub() folders share the same files.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace sinkscope {

class RunFiles {
public:
    // The files under `dir` on disk.
    explicit RunFiles(std::filesystem::path dir);
    // An empty folder in memory.
    static RunFiles in_memory();

    bool is_memory() const { return memory_ != nullptr; }
    // The folder on disk (InternalError in memory: code that needs a path has no memory form).
    const std::filesystem::path& dir() const;
    // The subfolder `rel` (created on disk by the first file written into it).
    RunFiles sub(const std::string& rel) const;
    // How an error names the file `rel`: its path on disk, "<memory>/rel" in memory.
    std::string shown(const std::string& rel) const;

    // Writes the file `rel` (replacing it), creating its folders on disk; on disk through a
    // temporary file and rename (write_file_atomic), so no reader sees it partly written.
    void write(const std::string& rel, const std::string& content) const;
    // The same for content produced in pieces: `next(buffer)` is called with an emptied buffer
    // until it returns false (on disk each piece is written before the next is made).
    void write(const std::string& rel, const std::function<bool(std::string& buffer)>& next) const;
    bool exists(const std::string& rel) const;
    // The bytes of `rel`; IoError naming it when there is no such file.
    std::string read(const std::string& rel) const;

    // In memory: every file written, by its path relative to the root folder (the one
    // in_memory() made, whatever sub() this handle is), in path order. InternalError on disk.
    const std::map<std::string, std::string>& files() const;

private:
    RunFiles() = default;
    std::string key(const std::string& rel) const { return prefix_ + rel; }

    std::filesystem::path dir_;  // on disk
    std::shared_ptr<std::map<std::string, std::string>> memory_;
    std::string prefix_;  // in memory: this folder's path ("" or ending in '/')
};

}  // namespace sinkscope
