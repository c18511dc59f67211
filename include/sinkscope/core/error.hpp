// Typed errors for sinkscope: every bad input becomes one clear line and an exit code.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace sinkscope {

// Exit codes used by the CLI (main maps each error kind to one of these).
enum class ErrorKind : int {
    Usage = 2,        // bad command-line option or option combination
    Input = 3,        // a file the user gave is malformed (truncated, wrong shape, NaN, ...)
    Unsupported = 4,  // valid input that sinkscope does not handle (dtype, architecture, ...)
    Io = 5,           // the file system refused (missing file, permission, disk full)
    Internal = 70,    // an invariant of sinkscope itself failed: a bug
};

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    ErrorKind kind() const noexcept { return kind_; }
    int exit_code() const noexcept { return static_cast<int>(kind_); }

private:
    ErrorKind kind_;
};

// A command-line option is wrong.
class UsageError : public Error {
public:
    explicit UsageError(const std::string& message) : Error(ErrorKind::Usage, message) {}
};

// A user-supplied file is malformed. The message always names the file first.
class InputError : public Error {
public:
    InputError(const std::string& file, const std::string& problem)
        : Error(ErrorKind::Input, file + ": " + problem), file_(file) {}
    const std::string& file() const noexcept { return file_; }

private:
    std::string file_;
};

// Well-formed input that is outside what sinkscope supports.
class UnsupportedError : public Error {
public:
    explicit UnsupportedError(const std::string& message)
        : Error(ErrorKind::Unsupported, message) {}
    UnsupportedError(const std::string& file, const std::string& problem)
        : Error(ErrorKind::Unsupported, file + ": not supported: " + problem) {}
};

// The operating system refused a file operation.
class IoError : public Error {
public:
    IoError(const std::string& file, const std::string& problem)
        : Error(ErrorKind::Io, file + ": " + problem) {}
};

// A sinkscope invariant failed.
class InternalError : public Error {
public:
    explicit InternalError(const std::string& message) : Error(ErrorKind::Internal, message) {}
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    return out.str();
}
}  // namespace detail

}  // namespace sinkscope

// Invariant check that throws (never aborts: the library is also loaded into Python).
#define SS_CHECK(cond, ...)                                                            \
    do {                                                                               \
        if (!(cond))                                                                   \
            throw ::sinkscope::InternalError(::sinkscope::detail::concat(              \
                __FILE__, ":", __LINE__, ": check failed: " #cond ": ", __VA_ARGS__)); \
    } while (0)

// Check on user input: throws InputError naming the file.
#define SS_CHECK_INPUT(cond, file, ...)                                                      \
    do {                                                                                     \
        if (!(cond))                                                                         \
            throw ::sinkscope::InputError((file), ::sinkscope::detail::concat(__VA_ARGS__)); \
    } while (0)
