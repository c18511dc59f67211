// The resource limits table (limits.hpp).
#include "sinkscope/core/limits.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <system_error>

#include "sinkscope/core/error.hpp"

namespace sinkscope {

namespace {

// Defaults: a wide margin above the largest genuine files known (tokenizer.json of 262k-token
// vocabularies is ~35 MB; no released checkpoint has 1,024 layers), low enough that the memory a
// file may make sinkscope allocate stays within a workstation's.
constexpr LimitInfo kLimits[] = {
    {Limit::JsonBytes, "json_bytes", uint64_t(64) << 20, "bytes of one JSON document"},
    {Limit::JsonDepth, "json_depth", 64, "nesting depth of JSON arrays and objects"},
    {Limit::DataBytes, "data_bytes", uint64_t(256) << 20, "bytes of one text/JSONL/CSV data file"},
    {Limit::LineBytes, "line_bytes", uint64_t(4) << 20, "bytes of one data line or CSV record"},
    {Limit::ImagePixels, "image_pixels", uint64_t(1) << 25,
     "pixels (width x height) of one image or of the image processor's size"},
    {Limit::PickleMemo, "pickle_memo", uint64_t(1) << 20, "memo entries of one pickle"},
    {Limit::PickleStack, "pickle_stack", uint64_t(1) << 16,
     "values on one pickle's stack (and open marks)"},
    {Limit::PickleObjects, "pickle_objects", uint64_t(1) << 21, "values one pickle makes"},
    {Limit::VocabSize, "vocab_size", uint64_t(1) << 21,
     "tokens of a vocabulary, and the largest token id"},
    {Limit::Layers, "layers", 1024, "transformer layers of a checkpoint"},
    {Limit::TokenizerNesting, "tokenizer_nesting", 16,
     "tokenizer.json Sequence steps nested in Sequence steps"},
    // 2^36 float32 elements are 256 GiB: more than a workstation holds, so only a view whose
    // strides repeat elements (np.broadcast_to, as_strided) reaches it.
    {Limit::ArrayElements, "array_elements", uint64_t(1) << 36,
     "elements of one array passed from Python (the work of an analysis grows with them)"},
};
constexpr size_t kNumLimits = sizeof kLimits / sizeof kLimits[0];
constexpr bool rows_in_enum_order() {
    for (size_t i = 0; i < kNumLimits; ++i)
        if (static_cast<size_t>(kLimits[i].id) != i) return false;
    return true;
}
static_assert(rows_in_enum_order(), "kLimits is indexed by Limit");

// The current values (atomic: worker threads read them while a Python caller may set one).
struct Values {
    std::array<std::atomic<uint64_t>, kNumLimits> v;
    Values() {
        for (size_t i = 0; i < kNumLimits; ++i) v[i] = kLimits[i].default_value;
    }
};
std::array<std::atomic<uint64_t>, kNumLimits>& values() {
    static Values values;
    return values.v;
}

const LimitInfo& info(Limit id) {
    return kLimits[static_cast<size_t>(id)];
}

}  // namespace

const LimitInfo* limit_table(size_t* n) {
    *n = kNumLimits;
    return kLimits;
}

uint64_t limit_value(Limit id) {
    return values()[static_cast<size_t>(id)].load();
}

void set_limit(Limit id, uint64_t value) {
    values()[static_cast<size_t>(id)] = value;
}

void set_limit(std::string_view assignment) {
    const size_t eq = assignment.find('=');
    const std::string_view name = assignment.substr(0, eq);
    for (const LimitInfo& l : kLimits) {
        if (name != l.name) continue;
        const std::string_view v = eq == std::string_view::npos ? "" : assignment.substr(eq + 1);
        uint64_t value = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
        if (v.empty() || ec != std::errc() || end != v.data() + v.size())
            throw UsageError("--limit " + std::string(l.name) +
                             "=N needs N as a non-negative integer below 2^64");
        set_limit(l.id, value);
        return;
    }
    std::string names;
    for (const LimitInfo& l : kLimits) names += (names.empty() ? "" : ", ") + std::string(l.name);
    throw UsageError("--limit takes NAME=N with NAME one of " + names);
}

std::string limits_help() {
    std::string out;
    for (const LimitInfo& l : kLimits)
        out += std::string(l.name) + " (" + std::to_string(l.default_value) + "): " + l.what + "\n";
    return out;
}

void throw_limit(const std::string& file, Limit id, const std::string& what, uint64_t found) {
    const LimitInfo& l = info(id);
    throw InputError(file, what + " " + std::to_string(found) + " exceeds the limit " + l.name +
                               " = " + std::to_string(limit_value(id)) +
                               " (raise it with --limit " + l.name + "=N if the file is genuine)");
}

std::string read_file_limited(const std::filesystem::path& path, Limit id) {
    const uint64_t max = limit_value(id);
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in)  // the system's reason (no such file, a symbolic link loop, permission denied)
        throw IoError(path.string(),
                      "cannot open for reading" +
                          (errno ? ": " + std::generic_category().message(errno) : std::string()));
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
        const uint64_t size = std::filesystem::file_size(path, ec);
        if (!ec) check_limit(path.string(), id, "size in bytes", size);
    }
    std::string out;
    char buf[1 << 16];
    while (in) {
        in.read(buf, sizeof buf);
        const auto got = static_cast<size_t>(in.gcount());
        if (out.size() + got > max)
            throw_limit(path.string(), id, "size in bytes (read so far)", out.size() + got);
        out.append(buf, got);
    }
    if (in.bad()) throw IoError(path.string(), "read failed");
    return out;
}

}  // namespace sinkscope
