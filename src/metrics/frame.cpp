// Token specialisation and reference-frame verdict (spec 8, 10.m, 10.n; PAPERS.md B.6, B.10).
#include "sinkscope/metrics/frame.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope::metrics {

const char* position_class_name(PositionClass c) {
    switch (c) {
        case PositionClass::First:
            return "first";
        case PositionClass::Last:
            return "last";
        case PositionClass::Other:
            return "other";
    }
    return "other";
}

PositionClass classify_position(int64_t position, int64_t length) {
    if (position == 0) return PositionClass::First;
    if (position == length - 1) return PositionClass::Last;
    return PositionClass::Other;
}

const char* frame_type_name(FrameType t) {
    switch (t) {
        case FrameType::Centralized:
            return "centralized";
        case FrameType::Bidirectional:
            return "bidirectional";
        case FrameType::Distributed:
            return "distributed";
        case FrameType::Inconclusive:
            return "inconclusive";
    }
    return "distributed";
}

Eigen::VectorXd column_means(const Eigen::MatrixXd& a) {
    if (a.rows() == 0) return Eigen::VectorXd();
    return a.colwise().sum().transpose() / static_cast<double>(a.rows());
}

int64_t top_key(const std::vector<double>& column_sums, int64_t n_rows) {
    SS_CHECK(!column_sums.empty() && n_rows > 0, "top key of an empty matrix");
    int64_t best = 0;
    double best_mean = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < column_sums.size(); ++j) {
        const double mean = column_sums[j] / static_cast<double>(n_rows);
        if (mean > best_mean) {  // first maximum
            best_mean = mean;
            best = static_cast<int64_t>(j);
        }
    }
    return best;
}

int64_t reference_count(const Eigen::MatrixXd& head_average) {
    const int64_t n = head_average.rows();
    if (n == 0) return 0;
    const Eigen::VectorXd c = column_means(head_average);
    int64_t count = 0;
    for (Eigen::Index j = 0; j < c.size(); ++j) count += c[j] > 0.1 ? 1 : 0;
    if (count == 0)
        count = std::max<int64_t>(1, static_cast<int64_t>(0.1 * static_cast<double>(n)));
    const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(0.3 * static_cast<double>(n)));
    return std::min(count, cap);
}

void FrameEvidence::resize(int64_t layers, int64_t mid_late) {
    n_layers = layers;
    mid_late_first = mid_late >= 0 ? mid_late : layers / 3;
    first.assign(static_cast<size_t>(layers), 0);
    last.assign(static_cast<size_t>(layers), 0);
    other.assign(static_cast<size_t>(layers), 0);
}

void FrameEvidence::merge(const FrameEvidence& o) {
    if (o.n_layers == 0) return;
    if (n_layers == 0) resize(o.n_layers, o.mid_late_first);
    SS_CHECK(o.n_layers == n_layers && o.mid_late_first == mid_late_first,
             "merging frame evidence of different layers");
    for (size_t l = 0; l < first.size(); ++l) {
        first[l] += o.first[l];
        last[l] += o.last[l];
        other[l] += o.other[l];
    }
    reference_count_sum += o.reference_count_sum;
    reference_count_n += o.reference_count_n;
    for (const auto& [lh, counts] : o.head_places)
        for (const auto& [k, n] : counts) head_places[lh][k] += n;
    for (const auto& [lh, counts] : o.head_tokens)
        for (const auto& [k, n] : counts) head_tokens[lh][k] += n;
}

double FrameEvidence::share_first_mid_late() const {
    int64_t f = 0, all = 0;
    for (int64_t l = mid_late_begin(); l < n_layers; ++l) {
        const auto k = static_cast<size_t>(l);
        f += first[k];
        all += first[k] + last[k] + other[k];
    }
    return all > 0 ? static_cast<double>(f) / static_cast<double>(all) : 0.0;
}

double FrameEvidence::mean_reference_count() const {
    return reference_count_n > 0 ? reference_count_sum / static_cast<double>(reference_count_n)
                                 : std::numeric_limits<double>::quiet_NaN();
}

std::vector<PositionClass> FrameEvidence::modal_classes() const {
    std::vector<PositionClass> out;
    for (size_t l = 0; l < first.size(); ++l) {
        PositionClass c = PositionClass::First;
        int64_t best = first[l];
        if (last[l] > best) c = PositionClass::Last, best = last[l];
        if (other[l] > best) c = PositionClass::Other;
        out.push_back(c);
    }
    return out;
}

FrameType frame_verdict(const FrameEvidence& e, double share_first, double max_reference_count) {
    if (e.n_layers == 0) return FrameType::Distributed;
    if (e.share_first_mid_late() >= share_first && e.mean_reference_count() < max_reference_count)
        return FrameType::Centralized;
    const auto modal = e.modal_classes();
    const bool any_first = std::count(modal.begin(), modal.end(), PositionClass::First) > 0;
    const bool any_last = std::count(modal.begin(), modal.end(), PositionClass::Last) > 0;
    if (any_first && any_last) return FrameType::Bidirectional;
    return FrameType::Distributed;
}

namespace {

// The modal key of counts (ties: the smallest key, as token specialisation's principled rule)
// and its share of all counts.
std::pair<std::string, double> modal(const std::map<std::string, int64_t>& counts) {
    int64_t total = 0, best = -1;
    std::string key;
    for (const auto& [k, n] : counts) {
        total += n;
        if (n > best) best = n, key = k;
    }
    return {key, total > 0 ? static_cast<double>(best) / static_cast<double>(total) : 0.0};
}

// Weights 1/k on each of the k types marked.
std::array<double, 3> among(bool c, bool d, bool b) {
    const double k = (c ? 1 : 0) + (d ? 1 : 0) + (b ? 1 : 0);
    return {c ? 1 / k : 0.0, d ? 1 / k : 0.0, b ? 1 / k : 0.0};
}

// The specialised heads (10.m) of the middle and late layers by `per_head` keys: their modal
// keys. Empty when fewer inputs than the rule needs.
std::vector<std::string> specialised(
    const std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>>& per_head,
    const FrameEvidence& e, const FrameSignatureRule& rule) {
    std::vector<std::string> keys;
    if (e.n_inputs < rule.specialised_min_inputs) return keys;
    for (const auto& [lh, counts] : per_head)
        if (const auto [key, share] = modal(counts); share >= rule.specialised_share)
            keys.push_back(key);
    return keys;
}

// Among the specialised heads' modal keys, the share on the most common one.
FrameSignature concentration(const char* name, const char* what,
                             const std::vector<std::string>& keys, const FrameSignatureRule& rule,
                             std::array<double, 3> high, const char* high_words) {
    FrameSignature s;
    s.name = name;
    s.prediction = std::string(">= ") + console_number(rule.concentrated) + ": " + high_words +
                   "; below: distributed or bidirectional";
    s.value = std::numeric_limits<double>::quiet_NaN();
    if (keys.empty()) {
        s.reading = std::string("no specialised head by ") + what;
        return s;
    }
    std::map<std::string, int64_t> counts;
    for (const auto& k : keys) ++counts[k];
    const auto [key, share] = modal(counts);
    s.value = share;
    s.measured = true;
    s.reading = console_number(share) + " of " + std::to_string(keys.size()) +
                " specialised heads on " + what + " " + key;
    s.weight = share >= rule.concentrated ? high : among(false, true, true);
    return s;
}

}  // namespace

std::array<double, 3> reference_count_weights(double count, const std::array<double, 3>& p) {
    if (count <= p[0]) return {1, 0, 0};
    if (count >= p[2]) return {0, 0, 1};
    if (count <= p[1]) {
        const double d = (count - p[0]) / (p[1] - p[0]);
        return {1 - d, d, 0};
    }
    const double b = (count - p[1]) / (p[2] - p[1]);
    return {0, 1 - b, b};
}

std::string depth_profile(const std::vector<double>& values) {
    const auto n = static_cast<int64_t>(values.size());
    int64_t finite = 0;
    bool all_negative = true;
    for (double v : values)
        if (std::isfinite(v)) ++finite, all_negative &= v < 0;
    if (finite < 3) return "none";
    if (all_negative) return "consistently negative";
    const int64_t cut[4] = {0, n / 3, 2 * n / 3, n};
    double mean[3];
    for (int r = 0; r < 3; ++r) {
        double acc = 0;
        int64_t cnt = 0;
        for (int64_t l = cut[r]; l < cut[r + 1]; ++l)
            if (std::isfinite(values[static_cast<size_t>(l)]))
                acc += values[static_cast<size_t>(l)], ++cnt;
        if (cnt == 0) return "none";
        mean[r] = acc / static_cast<double>(cnt);
    }
    if (mean[1] < mean[0] && mean[1] < mean[2]) return "U-shaped";
    const bool sign_changes = (mean[0] < 0) != (mean[1] < 0) || (mean[1] < 0) != (mean[2] < 0);
    return sign_changes ? "three-phase" : "none";
}

FrameReading read_frame_signatures(const FrameEvidence& e, const FrameSignatureRule& rule,
                                   const std::vector<double>& kl_reduction) {
    FrameReading r;
    const bool tokens = !e.head_tokens.empty();
    // 1. How many heads hold a consistent anchor (specialised on a token, or on a place without
    // token strings): most of them in a centralized or bidirectional frame, few where the anchor
    // moves from input to input (a model without BOS whose first word varies).
    {
        FrameSignature s;
        s.name = "specialised_heads";
        const auto& per_head = tokens ? e.head_tokens : e.head_places;
        const auto keys = specialised(per_head, e, rule);
        s.prediction = "> " + console_number(k_frame_specialised_majority) +
                       ": centralized or bidirectional; at most: distributed";
        s.value = std::numeric_limits<double>::quiet_NaN();
        s.measured = e.n_inputs >= rule.specialised_min_inputs && !per_head.empty();
        if (s.measured) {
            s.value = static_cast<double>(keys.size()) / static_cast<double>(per_head.size());
            s.reading = console_number(s.value) + " of " + std::to_string(per_head.size()) +
                        " middle/late heads specialised (by " + (tokens ? "token" : "place") + ")";
            s.weight = s.value > k_frame_specialised_majority ? among(true, false, true)
                                                              : among(false, true, false);
        } else {
            s.reading = "fewer than " + std::to_string(rule.specialised_min_inputs) + " inputs";
        }
        r.signatures.push_back(s);
    }
    // 2. Which token the specialised heads anchor on: one token (a BOS-like sink) only in a
    // centralized frame.
    r.signatures.push_back(
        concentration("anchor_token", "token",
                      tokens ? specialised(e.head_tokens, e, rule) : std::vector<std::string>{},
                      rule, {1, 0, 0}, "centralized"));
    // 3. Where they anchor: one place for centralized and distributed frames (a model without BOS
    // anchors on its first position), two places (first and last) for bidirectional ones.
    r.signatures.push_back(concentration("anchor_place", "place",
                                         specialised(e.head_places, e, rule), rule,
                                         among(true, true, false), "centralized or distributed"));
    // 4. Mean reference count of the middle and late layers (the paper: 1.0006 / 1.23 / 1.58).
    {
        FrameSignature s;
        s.name = "reference_count";
        const auto& p = rule.reference_counts;
        s.value = e.mean_reference_count();
        s.measured = std::isfinite(s.value);
        s.prediction = "centralized " + console_number(p[0]) + ", distributed " +
                       console_number(p[1]) + ", bidirectional " + console_number(p[2]) +
                       "; between two: split by distance";
        s.reading = s.measured ? "mean " + console_number(s.value) : "no middle or late layer";
        if (s.measured) s.weight = reference_count_weights(s.value, p);
        r.signatures.push_back(s);
    }
    // 5. A layer-wise switch of the anchor between the first and the last position.
    {
        FrameSignature s;
        s.name = "layer_switch";
        const auto modal_classes = e.modal_classes();
        const bool first =
            std::count(modal_classes.begin(), modal_classes.end(), PositionClass::First) > 0;
        const bool last =
            std::count(modal_classes.begin(), modal_classes.end(), PositionClass::Last) > 0;
        s.measured = e.n_layers > 0;
        s.value = first && last ? 1.0 : 0.0;
        s.prediction =
            "bidirectional: some layer anchors first and another last; centralized "
            "or distributed: no such switch";
        s.reading = first && last ? "switch" : "no switch";
        if (s.measured)
            s.weight = first && last ? among(false, false, true) : among(true, true, false);
        r.signatures.push_back(s);
    }
    // 6. The KL reduction's profile over depth (the paper: consistently negative / three-phase /
    // U-shaped for centralized / distributed / bidirectional).
    {
        FrameSignature s;
        s.name = "kl_profile";
        const std::string profile = depth_profile(kl_reduction);
        s.prediction =
            "centralized: consistently negative; distributed: three-phase; "
            "bidirectional: U-shaped";
        s.reading = profile;
        s.measured = profile != "none";
        s.value = std::numeric_limits<double>::quiet_NaN();
        if (profile == "consistently negative") s.weight = {1, 0, 0};
        if (profile == "three-phase") s.weight = {0, 1, 0};
        if (profile == "U-shaped") s.weight = {0, 0, 1};
        r.signatures.push_back(s);
    }
    for (const auto& s : r.signatures) {
        if (!s.measured) continue;
        ++r.n_measured;
        for (size_t t = 0; t < 3; ++t) r.scores[t] += s.weight[t];
    }
    std::array<size_t, 3> order{0, 1, 2};
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return r.scores[a] > r.scores[b]; });
    if (r.n_measured == 0) return r;
    r.margin = (r.scores[order[0]] - r.scores[order[1]]) / static_cast<double>(r.n_measured);
    if (r.n_measured >= 2 && r.margin >= rule.min_margin) r.verdict = k_frame_types[order[0]];
    return r;
}

}  // namespace sinkscope::metrics
