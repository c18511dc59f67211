// Token specialisation and reference-frame verdict (spec 8, 10.m, 10.n; PAPERS.md B.6, B.10).
#include "sinkscope/metrics/frame.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "sinkscope/core/error.hpp"

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

}  // namespace sinkscope::metrics
