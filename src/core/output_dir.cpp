// Output paths that never touch the user's files (see the header): checks, staging folders,
// atomic swaps into place and atomic single-file writes.
#include "sinkscope/core/output_dir.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28)
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"

namespace fs = std::filesystem;

namespace sinkscope {
namespace {

constexpr const char* kStagingMarker = ".sinkscope-staging";  // marks a resumable staging folder
constexpr std::uintmax_t kMaxRunJsonBytes = 64u << 20;        // larger is not a run.json of ours

// Streams run.json and stops as soon as it has seen {"tool": {"name": "sinkscope"}} at the top
// level. Iterative and depth-limited, so a hostile file can neither recurse nor hold memory.
class RunJsonProbe : public nlohmann::json_sax<nlohmann::json> {
public:
    bool found = false;
    bool null() override { return scalar(); }
    bool boolean(bool) override { return scalar(); }
    bool number_integer(number_integer_t) override { return scalar(); }
    bool number_unsigned(number_unsigned_t) override { return scalar(); }
    bool number_float(number_float_t, const string_t&) override { return scalar(); }
    bool binary(binary_t&) override { return scalar(); }
    bool string(string_t& s) override {
        if (depth_ == 2 && in_tool_ && key_ == "name" && s == "sinkscope") found = true;
        return scalar() && !found;  // stop parsing once found
    }
    bool start_object(std::size_t) override { return open(true); }
    bool start_array(std::size_t) override { return open(false); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& k) override {
        key_ = k;
        if (depth_ == 1) top_key_ = k;
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;
    }

private:
    int depth_ = 0;
    bool in_tool_ = false;
    std::string key_, top_key_;
    bool scalar() { return true; }
    bool open(bool object) {
        if (++depth_ > 64) return false;
        if (depth_ == 2) in_tool_ = object && top_key_ == "tool";
        return depth_ > 1 || object;  // a run.json is an object
    }
    bool close() {
        if (depth_ == 2) in_tool_ = false;
        --depth_;
        return true;
    }
};

bool is_empty_dir(const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p, ec) && fs::is_empty(p, ec) && !ec;
}

// The one-line refusals (UsageError: nothing was changed, the user chooses what to do).
void refuse_output_dir(const fs::path& path, bool overwrite) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(path, ec);
    if (!fs::exists(st)) return;
    if (!fs::is_directory(path, ec))
        throw UsageError(path.string() +
                         " exists and is not a directory: choose another output directory");
    if (is_empty_dir(path)) return;
    if (!overwrite)
        throw UsageError(path.string() +
                         " already exists and is not empty: choose a new output directory, or "
                         "pass --overwrite to replace an earlier sinkscope run there");
    if (!is_sinkscope_run(path))
        throw UsageError(path.string() +
                         " is not a sinkscope run (it has no run.json written by sinkscope): "
                         "--overwrite replaces only sinkscope's own runs; choose another "
                         "output directory");
}

// Creates a directory that did not exist before; false when the name is taken.
bool create_new_dir(const fs::path& p) {
    std::error_code ec;
    const bool created = fs::create_directory(p, ec);
    if (ec) throw IoError(p.string(), "cannot create directory: " + ec.message());
    return created;
}

}  // namespace

bool is_sinkscope_run(const fs::path& dir) {
    std::error_code ec;
    const fs::path file = dir / "run.json";
    if (!fs::is_regular_file(file, ec)) return false;
    const auto size = fs::file_size(file, ec);
    if (ec || size > kMaxRunJsonBytes) return false;
    std::ifstream in(file, std::ios::binary);
    if (!in) return false;
    RunJsonProbe probe;
    try {
        nlohmann::json::sax_parse(in, &probe, nlohmann::json::input_format_t::json, false);
    } catch (const std::exception&) {
        return false;
    }
    return probe.found;
}

void check_output_dir(const fs::path& path, bool overwrite) {
    if (path.empty()) throw UsageError("--out: empty output path");
    refuse_output_dir(path, overwrite);
}

void OutputDir::create_parents() {
    // Missing ancestors, outermost first; each created one is recorded to undo on failure.
    std::vector<fs::path> missing;
    std::error_code ec;
    for (fs::path p = fs::absolute(final_).parent_path(); !p.empty() && !fs::exists(p, ec);
         p = p.parent_path()) {
        missing.push_back(p);
        if (p == p.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        if (create_new_dir(*it)) created_parents_.push_back(*it);
    }
}

OutputDir::OutputDir(fs::path final_path, bool overwrite)
    : final_(std::move(final_path)), overwrite_(overwrite) {
    check_output_dir(final_, overwrite_);
    create_parents();
    const fs::path parent = fs::absolute(final_).parent_path();
    const std::string base = final_.filename().string() + ".partial-" + std::to_string(::getpid());
    for (int n = 0;; ++n) {
        fs::path candidate = parent / (n == 0 ? base : base + "-" + std::to_string(n));
        if (create_new_dir(candidate)) {
            staging_ = std::move(candidate);
            break;
        }
    }
}

OutputDir OutputDir::resumable(fs::path final_path, bool overwrite) {
    OutputDir d;
    d.final_ = std::move(final_path);
    d.overwrite_ = overwrite;
    check_output_dir(d.final_, overwrite);
    const fs::path staging =
        fs::absolute(d.final_).parent_path() / (d.final_.filename().string() + ".partial");
    std::error_code ec;
    if (fs::exists(fs::symlink_status(staging, ec))) {
        // Reused only when sinkscope made it (its marker); anything else is never touched.
        if (!fs::is_directory(fs::symlink_status(staging, ec)) ||
            !fs::exists(staging / kStagingMarker, ec))
            throw UsageError(staging.string() +
                             " exists and was not made by sinkscope: move it away or choose "
                             "another output directory");
        d.staging_ = staging;
    } else {
        d.create_parents();
        create_new_dir(staging);
        d.staging_ = staging;
        write_file_atomic(staging / kStagingMarker, "sinkscope staging folder\n");
    }
    return d;
}

OutputDir::OutputDir(OutputDir&& other) noexcept
    : final_(std::move(other.final_)),
      staging_(std::move(other.staging_)),
      created_parents_(std::move(other.created_parents_)),
      overwrite_(other.overwrite_),
      committed_(other.committed_),
      keep_(other.keep_) {
    other.staging_.clear();
    other.created_parents_.clear();
}

OutputDir::~OutputDir() {
    if (committed_ || keep_ || staging_.empty()) return;
    std::error_code ec;
    fs::remove_all(staging_, ec);
    for (auto it = created_parents_.rbegin(); it != created_parents_.rend(); ++it)
        fs::remove(*it, ec);  // only removes a folder that is still empty
}

void OutputDir::commit() {
    std::error_code ec;
    fs::remove(staging_ / kStagingMarker, ec);
    try {
        refuse_output_dir(final_, overwrite_);  // something may have appeared meanwhile
    } catch (const UsageError& e) {
        keep_ = true;
        throw UsageError(std::string(e.what()) + " (this run's results are kept in " +
                         staging_.string() + ")");
    }
    if (fs::exists(fs::symlink_status(final_, ec))) {
        // Swap old and new in one step, then remove the old run (now at the staging name).
        if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, final_.c_str(), RENAME_EXCHANGE) ==
            0) {
            committed_ = true;
            fs::remove_all(staging_, ec);
            return;
        }
        const int err = errno;
        if (err != EINVAL && err != ENOSYS && err != EOPNOTSUPP) {
            keep_ = true;
            throw IoError(final_.string(), std::string("cannot move results into place: ") +
                                               std::strerror(err) + " (results kept in " +
                                               staging_.string() + ")");
        }
        // File system without RENAME_EXCHANGE: move the old run aside first.
        fs::path old;
        for (int n = 0;; ++n) {
            old = final_.string() + ".old-" + std::to_string(::getpid()) + "-" + std::to_string(n);
            if (!fs::exists(fs::symlink_status(old, ec))) break;
        }
        fs::rename(final_, old, ec);
        if (ec) {
            keep_ = true;
            throw IoError(final_.string(), "cannot replace the earlier run: " + ec.message() +
                                               " (results kept in " + staging_.string() + ")");
        }
        fs::rename(staging_, final_, ec);
        if (ec) {
            std::error_code ignored;
            fs::rename(old, final_, ignored);
            keep_ = true;
            throw IoError(final_.string(), "cannot move results into place: " + ec.message() +
                                               " (results kept in " + staging_.string() + ")");
        }
        committed_ = true;
        fs::remove_all(old, ec);
        return;
    }
    fs::rename(staging_, final_, ec);
    if (ec) {
        keep_ = true;
        throw IoError(final_.string(), "cannot move results into place: " + ec.message() +
                                           " (results kept in " + staging_.string() + ")");
    }
    committed_ = true;
}

void check_output_file(const fs::path& path, bool overwrite,
                       const std::function<bool(const fs::path&)>& ours) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(path, ec))) {
        if (!fs::is_regular_file(fs::symlink_status(path, ec)))
            throw UsageError(path.string() + " exists and is not a regular file: move it away");
        if (!overwrite)
            throw UsageError(path.string() + " already exists: pass --overwrite to replace it");
        if (!ours(path))
            throw UsageError(path.string() +
                             " was not written by sinkscope: --overwrite replaces only "
                             "sinkscope's own files; move it away first");
    }
}

void write_output_file(const fs::path& path, const std::string& content, bool overwrite,
                       const std::function<bool(const fs::path&)>& ours) {
    check_output_file(path, overwrite, ours);
    write_file_atomic(path, content);
}

namespace {

// Writes the pieces `next` points `piece` at (until it returns false) to a new temporary file,
// then renames it to `path`; on any failure the temporary file is removed.
void write_pieces_atomic(const fs::path& path,
                         const std::function<bool(std::string_view& piece)>& next) {
    // A temporary name that did not exist (O_EXCL), so no file of the user's is truncated.
    fs::path tmp;
    int fd = -1;
    for (int n = 0; fd < 0; ++n) {
        tmp = path.string() + ".tmp-" + std::to_string(::getpid()) +
              (n ? "-" + std::to_string(n) : "");
        fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && (errno != EEXIST || n > 1000))
            throw IoError(tmp.string(),
                          std::string("cannot open for writing: ") + std::strerror(errno));
    }
    const auto discard = [&] {
        ::close(fd);
        ::unlink(tmp.c_str());
    };
    const auto fail = [&](const std::string& what) {
        discard();
        throw IoError(tmp.string(), what);
    };
    for (;;) {
        std::string_view piece;
        bool more = false;
        try {
            more = next(piece);
        } catch (...) {
            discard();
            throw;
        }
        if (!more) break;
        const char* p = piece.data();
        size_t left = piece.size();
        while (left > 0) {
            const ssize_t w = ::write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) fail(std::string("write failed: ") + std::strerror(errno));
            p += w;
            left -= size_t(w);
        }
    }
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw IoError(tmp.string(), std::string("write failed: ") + std::strerror(err));
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw IoError(path.string(), "cannot rename temporary file into place");
    }
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::string& content) {
    bool done = false;
    write_pieces_atomic(path, [&](std::string_view& piece) {
        if (done) return false;
        piece = content;
        done = true;
        return true;
    });
}

void write_file_atomic(const fs::path& path, const std::function<bool(std::string&)>& next) {
    std::string buffer;
    write_pieces_atomic(path, [&](std::string_view& piece) {
        buffer.clear();
        if (!next(buffer)) return false;
        piece = buffer;
        return true;
    });
}

std::string read_file(const fs::path& path) {
    // Only regular files: a device or a pipe named where a file belongs (/dev/zero as a state
    // file or table) would otherwise be read until the memory runs out. Size = the file's own.
    std::error_code ec;
    if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
        throw IoError(path.string(), "not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path.string(), "cannot open for reading");
    std::ostringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

}  // namespace sinkscope
