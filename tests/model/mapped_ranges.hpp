// Where a file is memory-mapped in this process (/proc/self/maps, Linux), and whether a tensor's
// bytes lie in such a mapping: tests of weights used in the file's pages.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace sinkscope::testutil {

using AddressRanges = std::vector<std::pair<uintptr_t, uintptr_t>>;

// Address ranges at which `file` is mapped into this process now.
inline AddressRanges mappings_of(const std::filesystem::path& file) {
    const std::string target = std::filesystem::canonical(file).string();
    AddressRanges out;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        const auto slash = line.find('/');
        if (slash == std::string::npos || line.substr(slash) != target) continue;
        std::istringstream in(line);
        std::string range;
        in >> range;
        const auto dash = range.find('-');
        out.emplace_back(std::stoull(range.substr(0, dash), nullptr, 16),
                         std::stoull(range.substr(dash + 1), nullptr, 16));
    }
    return out;
}

// True when all of `t`'s bytes lie inside one of `ranges`.
inline bool inside(const at::Tensor& t, const AddressRanges& ranges) {
    const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
    const uintptr_t end = begin + t.nbytes();
    for (const auto& [lo, hi] : ranges)
        if (begin >= lo && end <= hi) return true;
    return false;
}

}  // namespace sinkscope::testutil
