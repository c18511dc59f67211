// std::filesystem errors as the project's one-line IoError. The throwing overloads of
// std::filesystem (status, exists, directory_iterator, create_directories, rename, ...) report a
// symbolic link loop, a refused permission or a name too long as
// "filesystem error: <call>: <problem> [<path>]"; the CLI's and the Python module's central catch
// turn every such error that escapes a command into "PATH: PROBLEM" (exit code 5, OSError), the
// same line as any other refusal of the file system.
#pragma once

#include <filesystem>
#include <string>

#include "sinkscope/core/error.hpp"

namespace sinkscope {

inline IoError io_error_from(const std::filesystem::filesystem_error& e) {
    const std::string where = e.path1().empty() ? "file system" : e.path1().string();
    std::string problem = e.code().message();
    if (!e.path2().empty()) problem += " (and " + e.path2().string() + ")";
    return IoError(where, problem);
}

}  // namespace sinkscope
