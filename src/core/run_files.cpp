// A run's files on disk or in memory (run_files.hpp).
#include "sinkscope/core/run_files.hpp"

#include <system_error>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"

namespace fs = std::filesystem;

namespace sinkscope {

RunFiles::RunFiles(fs::path dir) : dir_(std::move(dir)) {}

RunFiles RunFiles::in_memory() {
    RunFiles f;
    f.memory_ = std::make_shared<std::map<std::string, std::string>>();
    return f;
}

const fs::path& RunFiles::dir() const {
    SS_CHECK(!memory_, "a run folder in memory has no path on disk");
    return dir_;
}

RunFiles RunFiles::sub(const std::string& rel) const {
    RunFiles f = *this;
    if (memory_)
        f.prefix_ = key(rel) + "/";
    else
        f.dir_ = dir_ / rel;
    return f;
}

std::string RunFiles::shown(const std::string& rel) const {
    return memory_ ? "<memory>/" + key(rel) : (dir_ / rel).string();
}

void RunFiles::write(const std::string& rel, const std::string& content) const {
    if (memory_) {
        (*memory_)[key(rel)] = content;
        return;
    }
    fs::create_directories((dir_ / rel).parent_path());
    write_file_atomic(dir_ / rel, content);
}

void RunFiles::write(const std::string& rel,
                     const std::function<bool(std::string& buffer)>& next) const {
    if (!memory_) {
        fs::create_directories((dir_ / rel).parent_path());
        write_file_atomic(dir_ / rel, next);
        return;
    }
    std::string content, piece;
    while (true) {
        piece.clear();
        if (!next(piece)) break;
        content += piece;
    }
    (*memory_)[key(rel)] = std::move(content);
}

bool RunFiles::exists(const std::string& rel) const {
    if (memory_) return memory_->count(key(rel)) > 0;
    std::error_code ec;
    return fs::exists(dir_ / rel, ec);
}

std::string RunFiles::read(const std::string& rel) const {
    if (!memory_) return read_file(dir_ / rel);
    const auto it = memory_->find(key(rel));
    if (it == memory_->end()) throw IoError(shown(rel), "no such file");
    return it->second;
}

const std::map<std::string, std::string>& RunFiles::files() const {
    SS_CHECK(memory_, "the files of a run folder on disk are not listed in memory");
    return *memory_;
}

}  // namespace sinkscope
