// Output paths that never touch the user's files (see the header): checks, staging folders,
// atomic swaps into place and atomic single-file writes.
#include "sinkscope/core/output_dir.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"

namespace fs = std::filesystem;

namespace sinkscope {
namespace {

constexpr const char* kStagingMarker = ".sinkscope-staging";  // marks a resumable staging folder
constexpr const char* kStagingMarkerText = "sinkscope staging folder\n";
constexpr std::uintmax_t kMaxRunJsonBytes = 64u << 20;  // larger is not a run.json of ours

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

// ---- the record of what a run wrote (kRunFilesName) --------------------------------------------

constexpr const char* kRunFilesKind = "sinkscope_run_files";  // its version number's key
constexpr int kRunFilesVersion = 1;
constexpr int kRunFilesMaxDepth = 8;  // {"files": [...]}: deeper is not a record of ours

std::function<void(const std::string&)>& fault_hook() {
    static std::function<void(const std::string&)> hook;
    return hook;
}
void fault_point(const std::string& step) {
    if (fault_hook()) fault_hook()(step);
}

// What a run folder holds: relative paths in generic form ("checkpoints/00-a/heads.csv").
struct Listing {
    std::set<std::string> files, folders;
    // A recorded folder, or one with a recorded entry below it: its contents are looked at one
    // by one instead of being kept (or removed) whole.
    bool holds_folder(const std::string& rel) const {
        if (folders.count(rel)) return true;
        const std::string prefix = rel + "/";
        for (const auto* set : {&files, &folders}) {
            const auto it = set->lower_bound(prefix);
            if (it != set->end() && it->compare(0, prefix.size(), prefix) == 0) return true;
        }
        return false;
    }
};

std::string join(const std::string& rel, const std::string& name) {
    return rel.empty() ? name : rel + "/" + name;
}

// The names in a folder, sorted (so "the first foreign path" is the same on every run).
std::vector<std::string> entry_names(const fs::path& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        names.push_back(it->path().filename().string());
    if (ec) throw IoError(dir.string(), "cannot list the folder: " + ec.message());
    std::sort(names.begin(), names.end());
    return names;
}

bool is_real_dir(const fs::path& p) {  // a directory, not a link to one
    std::error_code ec;
    return fs::is_directory(fs::symlink_status(p, ec));
}

// Everything under `root`/`rel`: folders (not followed when they are links) and other entries.
void list_tree(const fs::path& root, const std::string& rel, Listing& out) {
    for (const std::string& name : entry_names(rel.empty() ? root : root / rel)) {
        const std::string r = join(rel, name);
        if (is_real_dir(root / r)) {
            out.folders.insert(r);
            list_tree(root, r, out);
        } else {
            out.files.insert(r);
        }
    }
}

std::string run_files_json(const Listing& l) {
    const nlohmann::json j = {
        {kRunFilesKind, kRunFilesVersion},
        {"about",
         "The files and folders sinkscope wrote in this run folder. --overwrite replaces only "
         "these; anything else here (your notes, figures) is kept."},
        {"files", l.files},
        {"folders", l.folders}};
    // A name that is not UTF-8 is recorded with U+FFFD: it then counts as not ours (kept).
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// A relative path without empty, "." or ".." parts: an entry that names nothing outside the run.
bool is_plain_relative(const std::string& p) {
    if (p.empty() || p.front() == '/') return false;
    size_t start = 0;
    for (;;) {
        const size_t end = p.find('/', start);
        const std::string part = p.substr(start, end == std::string::npos ? end : end - start);
        if (part.empty() || part == "." || part == "..") return false;
        if (end == std::string::npos) return true;
        start = end + 1;
    }
}

// Deepest nesting of arrays and objects, outside strings (checked before a DOM is built).
int json_depth(const std::string& s) {
    int depth = 0, worst = 0;
    bool in_string = false, escaped = false;
    for (const char c : s) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            worst = std::max(worst, ++depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return worst;
}

// The record in `dir`, or nothing when it is absent (a run of a sinkscope from before the record)
// or not a well-formed record of ours (then the run is treated as having none: safe, see commit).
std::optional<Listing> read_run_files(const fs::path& dir) {
    const fs::path file = dir / kRunFilesName;
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(file, ec))) return std::nullopt;
    const auto size = fs::file_size(file, ec);
    if (ec || size > kMaxRunJsonBytes) return std::nullopt;
    std::string bytes;
    try {
        bytes = read_file(file);
    } catch (const Error&) {
        return std::nullopt;
    }
    if (json_depth(bytes) > kRunFilesMaxDepth) return std::nullopt;
    const nlohmann::json j = nlohmann::json::parse(bytes, nullptr, false);
    if (!j.is_object() || j.value(kRunFilesKind, nlohmann::json()) != kRunFilesVersion)
        return std::nullopt;
    Listing l;
    for (const auto& [key, set] :
         {std::pair{"files", &l.files}, std::pair{"folders", &l.folders}}) {
        const auto it = j.find(key);
        if (it == j.end() || !it->is_array()) return std::nullopt;
        for (const nlohmann::json& e : *it) {
            if (!e.is_string() || !is_plain_relative(e.get<std::string>())) return std::nullopt;
            set->insert(e.get<std::string>());
        }
    }
    return l;
}

// Entries under `root`/`rel` that `ours` does not hold, outermost first (a foreign folder is
// one entry: it moves whole).
void find_foreign(const fs::path& root, const std::string& rel, const Listing& ours,
                  std::vector<std::string>& out) {
    for (const std::string& name : entry_names(rel.empty() ? root : root / rel)) {
        const std::string r = join(rel, name);
        if (is_real_dir(root / r)) {
            if (ours.holds_folder(r))
                find_foreign(root, r, ours, out);
            else
                out.push_back(r);
        } else if (!ours.files.count(r)) {
            out.push_back(r);
        }
    }
}

// Removes what `ours` holds under `root`/`rel` (folders only once empty); anything else stays.
void remove_ours(const fs::path& root, const std::string& rel, const Listing& ours) {
    std::error_code ec;
    for (const std::string& name : entry_names(rel.empty() ? root : root / rel)) {
        const std::string r = join(rel, name);
        if (is_real_dir(root / r)) {
            if (!ours.holds_folder(r)) continue;
            remove_ours(root, r, ours);
            fs::remove(root / r, ec);  // fails, and keeps it, when something else is inside
        } else if (ours.files.count(r)) {
            fs::remove(root / r, ec);
        }
    }
}

// rename(2) that never replaces an existing `to`; returns 0 or the errno.
int move_no_replace(const fs::path& from, const fs::path& to) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
    const int err = errno;
    if (err != EINVAL && err != ENOSYS && err != EOPNOTSUPP) return err;
    std::error_code ec;  // a file system without RENAME_NOREPLACE: check, then rename
    if (fs::exists(fs::symlink_status(to, ec))) return EEXIST;
    return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

// Whether `rel` cannot be moved into `root` unchanged: the path exists there, or one of its
// parent folders exists as something other than a folder.
bool taken_in(const fs::path& root, const std::string& rel) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(root / rel, ec))) return true;
    fs::path p = root;
    for (const fs::path& part : fs::path(rel).parent_path()) {
        p /= part;
        const fs::file_status st = fs::symlink_status(p, ec);
        if (!fs::exists(st)) return false;
        if (!fs::is_directory(st)) return true;
    }
    return false;
}

// The user's entries of an earlier run, carried by rename from the old folder into the new one
// before the swap, and carried back when the commit fails.
class Carried {
public:
    Carried(fs::path from, fs::path to) : from_(std::move(from)), to_(std::move(to)) {}

    void move_all(const std::vector<std::string>& rels) {
        for (const std::string& r : rels) {
            fault_point("move");
            make_parents(fs::path(r).parent_path());
            if (const int err = move_no_replace(from_ / r, to_ / r))
                throw std::runtime_error("cannot move " + (from_ / r).string() +
                                         " into the new run: " + std::strerror(err));
            moved_.push_back(r);
        }
    }
    // Moves everything back; returns the entries that could not be (left in the new folder).
    std::vector<std::string> undo() {
        std::vector<std::string> stuck;
        for (auto it = moved_.rbegin(); it != moved_.rend(); ++it)
            if (move_no_replace(to_ / *it, from_ / *it) != 0) stuck.push_back(*it);
        moved_.clear();
        std::error_code ec;
        for (auto it = made_.rbegin(); it != made_.rend(); ++it) fs::remove(*it, ec);
        made_.clear();
        return stuck;
    }

private:
    fs::path from_, to_;
    std::vector<std::string> moved_;
    std::vector<fs::path> made_;  // folders made in the new run to hold moved entries

    void make_parents(const fs::path& rel) {
        fs::path p = to_;
        for (const fs::path& part : rel) {
            p /= part;
            if (is_real_dir(p)) continue;
            std::error_code ec;
            if (!fs::create_directory(p, ec) || ec)
                throw IoError(p.string(), "cannot create the folder: " +
                                              (ec ? ec.message() : std::string("name taken")));
            made_.push_back(p);
        }
    }
};

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
        write_file_atomic(staging / kStagingMarker, kStagingMarkerText);
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
    // A resumable staging folder keeps its marker until nothing can refuse any more: a refused
    // commit leaves it reusable by the next run.
    const bool resumable = fs::exists(staging_ / kStagingMarker, ec);
    const auto drop_marker = [&] { fs::remove(staging_ / kStagingMarker, ec); };
    const auto keep_and_throw = [&](const std::string& what) {
        keep_ = true;
        throw IoError(final_.string(), what + " (results kept in " + staging_.string() + ")");
    };
    try {
        refuse_output_dir(final_, overwrite_);  // something may have appeared meanwhile
    } catch (const UsageError& e) {
        keep_ = true;
        throw UsageError(std::string(e.what()) + " (this run's results are kept in " +
                         staging_.string() + ")");
    }
    // The record of what this run wrote, itself included.
    Listing written;
    try {
        list_tree(staging_, "", written);
        written.files.erase(kStagingMarker);
        written.files.insert(kRunFilesName);
        write_file_atomic(staging_ / kRunFilesName, run_files_json(written));
    } catch (const Error& e) {
        keep_and_throw(std::string("cannot record the files of this run: ") + e.what());
    }
    if (!fs::exists(fs::symlink_status(final_, ec))) {
        drop_marker();
        fs::rename(staging_, final_, ec);
        if (ec) keep_and_throw("cannot move results into place: " + ec.message());
        committed_ = true;
        return;
    }

    // An earlier run (or an empty folder) is there. What it recorded is sinkscope's; without a
    // record (a run of an earlier sinkscope) only the paths this run writes count as sinkscope's.
    // Everything else is the user's and is carried into the new run, never removed.
    const std::optional<Listing> recorded = read_run_files(final_);
    const Listing& ours = recorded ? *recorded : written;
    std::vector<std::string> foreign;
    try {
        find_foreign(final_, "", ours, foreign);
    } catch (const Error& e) {
        keep_and_throw(std::string("cannot look through the earlier run: ") + e.what());
    }
    for (const std::string& r : foreign) {
        if (!taken_in(staging_, r)) continue;
        keep_ = true;
        throw UsageError((final_ / r).string() +
                         " was not written by sinkscope (it is not in the earlier run's " +
                         kRunFilesName +
                         ") and this run writes that name: move it away, then run "
                         "again (this run's results are kept in " +
                         staging_.string() + ")");
    }
    drop_marker();
    Carried carried(final_, staging_);
    // Moves the user's entries back after a failure; they stay in the kept results when one
    // cannot be moved back, and the error says so.
    const auto undo_and_throw = [&](const std::string& what) {
        const std::vector<std::string> stuck = carried.undo();
        std::string where;
        if (!stuck.empty()) {
            where = "; " + std::to_string(stuck.size()) + " of your entries (first: " + stuck[0] +
                    ") could not be moved back from " + staging_.string();
        } else if (resumable) {
            try {  // reusable again by the next run (never while it holds entries of the user's)
                write_file_atomic(staging_ / kStagingMarker, kStagingMarkerText);
            } catch (const Error&) {
            }
        }
        keep_and_throw(what + where);
    };
    fs::path old_run;  // where the earlier run is after the swap
    std::string failure;
    try {
        carried.move_all(foreign);
        fault_point("swap");
        // Swap old and new in one step.
        if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, final_.c_str(), RENAME_EXCHANGE) ==
            0) {
            old_run = staging_;
        } else {
            const int err = errno;
            if (err != EINVAL && err != ENOSYS && err != EOPNOTSUPP)
                throw std::runtime_error(std::string("cannot move results into place: ") +
                                         std::strerror(err));
            // File system without RENAME_EXCHANGE: move the old run aside first.
            fs::path old;
            for (int n = 0;; ++n) {
                old = final_.string() + ".old-" + std::to_string(::getpid()) + "-" +
                      std::to_string(n);
                if (!fs::exists(fs::symlink_status(old, ec))) break;
            }
            fs::rename(final_, old, ec);
            if (ec) throw std::runtime_error("cannot replace the earlier run: " + ec.message());
            fs::rename(staging_, final_, ec);
            if (ec) {
                std::error_code ignored;
                fs::rename(old, final_, ignored);
                throw std::runtime_error("cannot move results into place: " + ec.message());
            }
            old_run = old;
        }
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) undo_and_throw(failure);
    committed_ = true;
    // The earlier run's own files go; anything that appeared there meanwhile stays (in old_run).
    try {
        remove_ours(old_run, "", ours);
    } catch (const Error&) {
    }
    fs::remove(old_run, ec);  // only when nothing else is left in it
}

void record_run_file(const fs::path& run_dir, const std::string& name) {
    std::optional<Listing> l = read_run_files(run_dir);
    if (!l || l->files.count(name)) return;
    l->files.insert(name);
    write_file_atomic(run_dir / kRunFilesName, run_files_json(*l));
}

void set_commit_fault_hook_for_testing(std::function<void(const std::string& step)> hook) {
    fault_hook() = std::move(hook);
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
