// Shared by the zoo golden tests: reads ../shared/zoo/<model>/golden/<input>/*.npy and compares a
// forward pass's tensors with them by max absolute difference, naming the worst index.
#pragma once

#include <cmath>
#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"

#include "sinkscope/io/npy.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::testutil {

// Golden tolerances of issue 6 (max absolute difference).
constexpr double kZooLogitTol = 1e-4;
constexpr double kZooAttentionTol = 1e-5;
constexpr double kZooHiddenTol = 1e-4;

// Golden input directories of one zoo model (fox, robot, ...), sorted.
inline std::vector<std::filesystem::path> zoo_inputs(const std::filesystem::path& model_dir) {
    std::vector<std::filesystem::path> out;
    for (const auto& e : std::filesystem::directory_iterator(model_dir / "golden"))
        if (e.is_directory()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

inline std::vector<int32_t> zoo_ids(const std::filesystem::path& input_dir,
                                    const char* file = "input_ids.npy") {
    const auto wide = io::read_npy(input_dir / file).to_i64();
    return std::vector<int32_t>(wide.begin(), wide.end());
}

// The text of a single-text golden input (manifest "text"); nullopt for images and text pairs.
inline std::optional<std::string> zoo_text(const std::filesystem::path& input_dir) {
    const auto manifest = nlohmann::json::parse(read_file(input_dir.parent_path() / "manifest.json"));
    const std::string name = input_dir.filename().string();
    for (const auto& in : manifest.at("inputs"))
        if (in.at("name") == name && in.contains("text") && !in.contains("text_pair"))
            return in.at("text").get<std::string>();
    return std::nullopt;
}

// Golden array as an f64 CPU tensor of its stored shape.
inline at::Tensor zoo_tensor(const std::filesystem::path& file) {
    const io::NpyArray a = io::read_npy(file);
    const std::vector<double> v = a.to_f64();
    return at::tensor(v, at::TensorOptions().dtype(at::kDouble)).view(a.shape).clone();
}

// Max |got - expected| over every entry; -inf == -inf counts as equal, any other non-finite
// mismatch as infinite. Fails with the worst flat index and its multi-index when above `tol`.
inline double expect_close(const std::string& what, const at::Tensor& got_any,
                           const at::Tensor& expected_any, double tol) {
    const at::Tensor got = got_any.to(at::kCPU, at::kDouble).contiguous();
    const at::Tensor expected = expected_any.to(at::kCPU, at::kDouble).contiguous();
    EXPECT_EQ(got.sizes(), expected.sizes()) << what << ": shape";
    if (got.sizes() != expected.sizes()) return INFINITY;
    const double* g = got.data_ptr<double>();
    const double* e = expected.data_ptr<double>();
    double worst = 0;
    int64_t at_index = -1;
    for (int64_t i = 0; i < got.numel(); ++i) {
        double d;
        if (std::isinf(e[i]) || std::isinf(g[i])) d = g[i] == e[i] ? 0 : INFINITY;
        else d = std::fabs(g[i] - e[i]);
        if (!(d <= worst)) {
            worst = d;
            at_index = i;
        }
    }
    std::ostringstream idx;
    if (at_index >= 0) {
        std::vector<int64_t> multi(static_cast<size_t>(got.dim()));
        int64_t rest = at_index;
        for (int64_t d = got.dim() - 1; d >= 0; --d) {
            multi[static_cast<size_t>(d)] = rest % got.size(d);
            rest /= got.size(d);
        }
        idx << "[";
        for (size_t d = 0; d < multi.size(); ++d) idx << (d ? ", " : "") << multi[d];
        idx << "] got " << g[at_index] << " expected " << e[at_index];
    }
    EXPECT_LE(worst, tol) << what << ": max |diff| " << worst << " at " << idx.str();
    return worst;
}

}  // namespace sinkscope::testutil
