// Staged output directories and atomic file writes.
#include "sinkscope/core/output_dir.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <system_error>

#include "sinkscope/core/error.hpp"

namespace fs = std::filesystem;

namespace sinkscope {

OutputDir::OutputDir(fs::path final_path) : final_(std::move(final_path)) {
    if (final_.empty()) throw UsageError("--out: empty output path");
    fs::path parent = fs::absolute(final_).parent_path();
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw IoError(parent.string(), "cannot create directory: " + ec.message());
    staging_ = parent / (final_.filename().string() + ".partial-" + std::to_string(::getpid()));
    fs::remove_all(staging_, ec);
    fs::create_directories(staging_, ec);
    if (ec) throw IoError(staging_.string(), "cannot create directory: " + ec.message());
}

OutputDir OutputDir::resumable(fs::path final_path) {
    OutputDir d;
    d.final_ = std::move(final_path);
    if (d.final_.empty()) throw UsageError("--out: empty output path");
    fs::path parent = fs::absolute(d.final_).parent_path();
    d.staging_ = parent / (d.final_.filename().string() + ".partial");
    std::error_code ec;
    fs::create_directories(d.staging_, ec);
    if (ec) throw IoError(d.staging_.string(), "cannot create directory: " + ec.message());
    return d;
}

OutputDir::~OutputDir() {
    if (!committed_ && !keep_ && !staging_.empty()) {
        std::error_code ec;
        fs::remove_all(staging_, ec);
    }
}

void OutputDir::commit() {
    std::error_code ec;
    if (fs::exists(final_)) {
        fs::path old = final_.string() + ".old-" + std::to_string(::getpid());
        fs::rename(final_, old, ec);
        if (ec) throw IoError(final_.string(), "cannot replace existing output: " + ec.message());
        fs::rename(staging_, final_, ec);
        if (ec) {
            fs::rename(old, final_);
            throw IoError(final_.string(), "cannot move results into place: " + ec.message());
        }
        fs::remove_all(old, ec);
    } else {
        fs::rename(staging_, final_, ec);
        if (ec) throw IoError(final_.string(), "cannot move results into place: " + ec.message());
    }
    committed_ = true;
}

void write_file_atomic(const fs::path& path, const std::string& content) {
    fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw IoError(tmp.string(), "cannot open for writing");
        out.write(content.data(), static_cast<std::streamsize>(content.size()));
        out.flush();
        if (!out) throw IoError(tmp.string(), "write failed");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw IoError(path.string(), "cannot rename temporary file into place");
    }
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path.string(), "cannot open for reading");
    std::ostringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

}  // namespace sinkscope
