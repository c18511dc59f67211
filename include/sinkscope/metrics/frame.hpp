// Token specialisation and the reference-frame verdict (spec section 8 "Token
// specialisation", "Reference-frame type", 10.m, 10.n; PAPERS.md B.6, B.10).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Dense>

namespace sinkscope::metrics {

enum class PositionClass { First, Last, Other };
const char* position_class_name(PositionClass c);
PositionClass classify_position(int64_t position, int64_t length);

// Column means (1/n) sum_i a_ij of a [n, n] matrix (masked entries are 0 and count).
Eigen::VectorXd column_means(const Eigen::MatrixXd& a);
// First key j with the largest column mean column_sums[j] / n_rows, where column_sums[j] =
// sum_i a_ij over the n_rows rows of a head's [n, n] matrix (masked entries are 0 and count).
int64_t top_key(const std::vector<double>& column_sums, int64_t n_rows);

// Reference-token count R of spec 8 value space on a head-averaged [n, n] matrix: keys with
// column mean > 0.1, else the top 10% (at least 1); at most int(0.3 n) (at least 1).
int64_t reference_count(const Eigen::MatrixXd& head_average);

enum class FrameType { Centralized, Bidirectional, Distributed };
const char* frame_type_name(FrameType t);

// Pooled counts the verdict is taken from (mergeable by addition).
struct FrameEvidence {
    int64_t n_layers = 0;
    // per layer: anchors (input x head) in each position class
    std::vector<int64_t> first, last, other;
    // middle and late layers (>= floor(L/3), 10.n): reference counts summed and their number
    double reference_count_sum = 0;
    int64_t reference_count_n = 0;

    // The first of the middle and late layers: floor(L/3) when the inputs hold every layer of the
    // model, else the first input layer at or past the model's floor(L/3) (RefFrameConfig).
    int64_t mid_late_first = 0;

    // Layers of the inputs and their first middle or late layer (-1: floor(n_layers / 3)).
    void resize(int64_t n_layers, int64_t mid_late_first = -1);
    void merge(const FrameEvidence& other);
    int64_t mid_late_begin() const { return mid_late_first; }
    double share_first_mid_late() const;               // pooled share of anchors at position 0
    double mean_reference_count() const;               // over inputs x middle/late layers
    std::vector<PositionClass> modal_classes() const;  // per layer (ties: first < last < other)
};

// spec 8 / 10.n: centralized when share_first_mid_late >= share_first (0.9) and the mean
// reference count < max_reference_count (1.2); bidirectional when some layer's modal class is first
// and another's last; else distributed.
inline constexpr double k_centralized_share_first = 0.9;
inline constexpr double k_centralized_max_reference_count = 1.2;
FrameType frame_verdict(const FrameEvidence& evidence,
                        double share_first = k_centralized_share_first,
                        double max_reference_count = k_centralized_max_reference_count);

}  // namespace sinkscope::metrics
