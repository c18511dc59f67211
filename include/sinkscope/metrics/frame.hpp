// Token specialisation and the reference-frame verdict (spec section 8 "Token
// specialisation", "Reference-frame type", 10.m, 10.n; PAPERS.md B.6, B.10).
#pragma once

#include <array>
#include <cstdint>
#include <map>
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

// Inconclusive: the signature verdict's margin is below --frame-min-margin (never the rule's).
enum class FrameType { Centralized, Bidirectional, Distributed, Inconclusive };
const char* frame_type_name(FrameType t);
// The three frame types, in the order of FrameSignature::consistent.
inline constexpr std::array<FrameType, 3> k_frame_types{
    FrameType::Centralized, FrameType::Distributed, FrameType::Bidirectional};

// Pooled counts the verdict is taken from (mergeable by addition).
struct FrameEvidence {
    int64_t n_layers = 0;
    // per layer: anchors (input x head) in each position class
    std::vector<int64_t> first, last, other;
    // middle and late layers (>= floor(L/3), 10.n): reference counts summed and their number
    double reference_count_sum = 0;
    int64_t reference_count_n = 0;
    // Middle and late layers: per (layer, head), the inputs in which each place ("first",
    // "last" or "#j") and, when the inputs come with token strings, each token was its anchor.
    std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> head_places, head_tokens;
    int64_t n_inputs = 0;  // the inputs seen (set by the accumulator's finish)

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

// The verdict from the reference-frame paper's signatures (docs/metrics.md "Reference-frame
// type"). Each signature measured gives weights summing to 1 over the types it is consistent
// with (1/k each for k types; reference_count splits between the two nearest prototypes); the
// type with the largest score wins, and the margin is (largest - second largest) / (signatures
// measured), in [0, 1]. Below min_margin, or with fewer than two signatures measured, the verdict
// is inconclusive.
// The paper's mean reference counts of the three types (centralized, distributed, bidirectional).
inline constexpr std::array<double, 3> k_frame_reference_counts{1.0006, 1.23, 1.58};
inline constexpr double k_frame_min_margin = 0.2;
// More than this share of the middle and late heads specialised: a frame with strong anchors.
inline constexpr double k_frame_specialised_majority = 0.5;
inline constexpr double k_specialised_share = 0.3;      // 10.m: modal share of a specialised head
inline constexpr int64_t k_specialised_min_inputs = 5;  // ... over at least this many inputs
struct FrameSignatureRule {
    double concentrated = k_centralized_share_first;  // share of heads on one place / token
    std::array<double, 3> reference_counts = k_frame_reference_counts;
    double min_margin = k_frame_min_margin;
    // A head is specialised when one key is its anchor in at least this share of at least this
    // many inputs (10.m, --specialised-share, --specialised-min-inputs).
    double specialised_share = k_specialised_share;
    int64_t specialised_min_inputs = k_specialised_min_inputs;
};

struct FrameSignature {
    std::string name;     // specialised_heads, anchor_token, anchor_place, reference_count, ...
    double value = 0;     // the measured value (NaN: not measured, or a word: see reading)
    std::string reading;  // what was measured, in words
    bool measured = false;
    std::array<double, 3> weight{};  // the score it gives k_frame_types[k]; sums to 1 if measured
    std::string prediction;          // what each type predicts for it, in words
};

struct FrameReading {
    std::vector<FrameSignature> signatures;
    std::array<double, 3> scores{};  // per k_frame_types
    int64_t n_measured = 0;
    double margin = 0;
    FrameType verdict = FrameType::Inconclusive;
};

// kl_reduction: the per-layer KL reduction of the middle sink percentile, in layer order (empty
// or with fewer than 3 finite values: the profile is not measured).
FrameReading read_frame_signatures(const FrameEvidence& evidence, const FrameSignatureRule& rule,
                                   const std::vector<double>& kl_reduction);
// The weights of a mean reference count: all on a type at or beyond its prototype's side, else
// split linearly between the two prototypes it lies between.
std::array<double, 3> reference_count_weights(double count, const std::array<double, 3>& protos);
std::string depth_profile(const std::vector<double>& values);

}  // namespace sinkscope::metrics
