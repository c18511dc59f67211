// Shared pieces of the libFuzzer targets (tests/fuzz/README.md). Each target feeds one parser of
// untrusted input. The contract it checks: a bad file ends in one of the typed input errors
// (InputError, UnsupportedError, IoError, or the UsageError of a state file that belongs to
// another run), never in a crash, a sanitizer report, an InternalError (exit 70 means a bug), an
// untyped exception, a hang or an allocation beyond libFuzzer's memory limit.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"

namespace sinkscope::fuzz {

// A folder of this process for the files a path-based parser reads: under /dev/shm when it
// exists (no disk traffic per run), else TMPDIR or /tmp. Removed at exit.
inline const std::filesystem::path& scratch_dir() {
    static const std::filesystem::path dir = [] {
        std::filesystem::path base = "/dev/shm";
        if (!std::filesystem::is_directory(base)) {
            const char* t = std::getenv("TMPDIR");
            base = t && *t ? t : "/tmp";
        }
        std::filesystem::path d = base / ("sinkscope-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        return d;
    }();
    // Registered after `dir` is constructed (and its destructor registered), so at exit it runs
    // before `dir` is destroyed; registered inside dir's initialiser it ran after, reading a freed
    // path (ASan: heap-use-after-free at exit, reported by fuzz_report as an empty-input crash).
    static const bool removed_at_exit = (std::atexit([] {
                                             std::error_code ec;
                                             std::filesystem::remove_all(scratch_dir(), ec);
                                         }),
                                         true);
    (void)removed_at_exit;
    return dir;
}

// A clean sub-folder `name` of the scratch folder (emptied on every call).
inline std::filesystem::path fresh_dir(const std::string& name) {
    const std::filesystem::path d = scratch_dir() / name;
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
    std::filesystem::create_directories(d);
    return d;
}

inline std::filesystem::path write_file(const std::filesystem::path& path, std::string_view bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    if (!f) std::abort();  // the scratch folder itself failed: not a finding about the parser
    return path;
}

// Runs `fn`; the typed errors a bad input may end in are swallowed, anything else propagates
// (libFuzzer reports an uncaught exception as a crash, with the input that caused it).
// The message must also be one printable line: file strings are escaped (core/format's
// printable()), so a control byte in it means a file's bytes reached the terminal raw.
inline void check_message(const Error& e) {
    for (const char c : std::string_view(e.what())) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
            std::fprintf(stderr, "fuzz: error message with a raw control byte 0x%02x: %s\n", u,
                         e.what());
            std::abort();
        }
    }
}

template <class Fn>
void expect_clean(Fn&& fn, bool usage_ok = false) {
    try {
        fn();
    } catch (const InputError& e) {
        check_message(e);
    } catch (const UnsupportedError& e) {
        check_message(e);
    } catch (const IoError& e) {
        check_message(e);
    } catch (const UsageError& e) {
        if (!usage_ok) throw;
        check_message(e);
    }
}

// Splits the input at the first occurrence of `sep` (the rest is empty when absent).
inline std::pair<std::string_view, std::string_view> split_at(std::string_view s,
                                                              std::string_view sep) {
    const size_t k = s.find(sep);
    if (k == std::string_view::npos) return {s, {}};
    return {s.substr(0, k), s.substr(k + sep.size())};
}

// Reads every tensor of a weight store as the model loader would (float32), skipping only
// tensors over 2^20 elements (a small fuzz input cannot hold one; it only declares it).
inline void read_tensors(const io::WeightStore& store) {
    for (const std::string& name : store.names()) {
        const io::TensorView t = store.get(name);
        if (t.numel() <= (int64_t(1) << 20)) (void)io::to_f32(t);
    }
}

inline std::string_view as_view(const uint8_t* data, size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace sinkscope::fuzz
