// Clark et al. (2019) head distances (clark2019.hpp): smoothed rows part-major, their JS
// divergences by the classical pair kernel (pair_kernels.hpp, the same vectorised logarithm and
// summation order as the head accumulator's JS), summed over rows.
#include "sinkscope/metrics/clark2019.hpp"

#include <algorithm>
#include <vector>

#include "metrics/pair_blocks.hpp"
#include "metrics/pair_kernels.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/head.hpp"

namespace sinkscope::metrics {

namespace {

// Query rows handed to the pair kernel at once: the [n, n] sums are read and written once per
// batch. Fixed, so the summation order (and every bit) does not depend on the thread count.
constexpr int64_t kRowsPerBatch = 8;

// One smoothed row set, part-major: part j of head a at x[j * ld + a].
struct RowSet {
    std::vector<double> x, self, norm;
    int64_t parts = 0;
};

}  // namespace

ClarkAccumulator::ClarkAccumulator(int64_t n_layers, int64_t n_heads, int n_threads)
    : n_layers_(n_layers), n_heads_(n_heads), n_threads_(resolved_threads(n_threads)) {
    if (n_layers <= 0 || n_heads <= 0)
        throw UsageError("a Clark accumulator needs n_layers > 0 and n_heads > 0");
    const int64_t n = n_layers * n_heads;
    keep_.setZero(n, n);
    drop_.setZero(n, n);
}

void ClarkAccumulator::add(const AttentionInput& x, int64_t sink) {
    SS_CHECK(x.n_layers == n_layers_ && x.n_heads == n_heads_, "input of ", x.n_layers, " x ",
             x.n_heads, " heads, expected ", n_layers_, " x ", n_heads_);
    const int64_t n = n_layers_ * n_heads_, ld = n + kernels::kPad, T = x.length;
    if (T <= 0) return;
    std::vector<double> scratch_cos(size_t(n * n)), scratch_euc(size_t(n * n)), buffer;
    std::vector<RowSet> keep(kRowsPerBatch), drop(kRowsPerBatch);
    for (int64_t i0 = 0; i0 < T; i0 += kRowsPerBatch) {
        const int64_t i1 = std::min(T, i0 + kRowsPerBatch);
        // Pass 1: the batch's smoothed rows, head by head (rows() is safe to read that way).
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t kb = x.key_begin(i), ke = x.key_end(i), d = ke - kb;
            RowSet& k = keep[size_t(i - i0)];
            k.parts = d;
            k.x.assign(size_t(d * ld), 0.0);
            const bool with_sink = sink >= kb && sink < ke && d >= 2 && T >= 2;
            RowSet& dr = drop[size_t(i - i0)];
            dr.parts = with_sink ? d - 1 : 0;
            dr.x.assign(size_t(std::max<int64_t>(dr.parts, 0) * ld), 0.0);
        }
        for (int64_t l = 0; l < n_layers_; ++l)
            for (int64_t h = 0; h < n_heads_; ++h) {
                const int64_t a = l * n_heads_ + h;
                const double* block = x.rows(l, h, i0, i1, buffer);
                for (int64_t i = i0; i < i1; ++i) {
                    const double* p = block + (i - i0) * x.n_tokens;
                    const int64_t kb = x.key_begin(i), d = x.key_end(i) - kb;
                    RowSet& k = keep[size_t(i - i0)];
                    for (int64_t j = 0; j < d; ++j)
                        k.x[size_t(j * ld + a)] =
                            kClarkSmoothing / double(T) + (1.0 - kClarkSmoothing) * p[kb + j];
                    RowSet& dr = drop[size_t(i - i0)];
                    if (dr.parts == 0) continue;
                    double content = 0;  // 1 - p_s, summed from the content parts
                    for (int64_t j = 0; j < d; ++j)
                        if (kb + j != sink) content += p[kb + j];
                    int64_t c = 0;
                    for (int64_t j = 0; j < d; ++j) {
                        if (kb + j == sink) continue;
                        const double pi = content > 0 ? p[kb + j] / content : 1.0 / double(d - 1);
                        dr.x[size_t(c++ * ld + a)] =
                            kClarkSmoothing / double(T - 1) + (1.0 - kClarkSmoothing) * pi;
                    }
                }
            }
        // Pass 2: each set's statistics, then every pair of every set of the batch.
        std::vector<kernels::ClassicalRows> sets_keep, sets_drop;
        for (int64_t i = i0; i < i1; ++i) {
            for (RowSet* s : {&keep[size_t(i - i0)], &drop[size_t(i - i0)]}) {
                if (s->parts == 0) continue;
                s->self.assign(size_t(ld), 0.0);
                s->norm.assign(size_t(ld), 0.0);
                kernels::row_statistics({s->x.data(), ld, s->parts}, n, s->self.data(),
                                        s->norm.data());
                (s == &keep[size_t(i - i0)] ? sets_keep : sets_drop)
                    .push_back({{s->x.data(), ld, s->parts}, s->self.data(), s->norm.data()});
            }
        }
        auto run = [&](const std::vector<kernels::ClassicalRows>& sets, Eigen::MatrixXd& sums) {
            if (sets.empty()) return;
            const kernels::ClassicalPairs args{.sets = sets.data(),
                                               .n_sets = int64_t(sets.size()),
                                               .cos_sum = scratch_cos.data(),
                                               .js_sum = sums.data(),
                                               .euc_sum = scratch_euc.data(),
                                               .ld = n};
            for_pair_blocks(n, n_threads_, [&](int64_t b0, int64_t b1) {
                kernels::classical_pairs(args, n, b0, b1);
            });
        };
        run(sets_keep, keep_);
        run(sets_drop, drop_);
        rows_keep_ += int64_t(sets_keep.size());
        rows_drop_ += int64_t(sets_drop.size());
    }
}

void ClarkAccumulator::merge(const ClarkAccumulator& o) {
    if (o.n_layers_ != n_layers_ || o.n_heads_ != n_heads_)
        throw UsageError("cannot merge Clark accumulators of different shapes");
    keep_ += o.keep_;
    drop_ += o.drop_;
    rows_keep_ += o.rows_keep_;
    rows_drop_ += o.rows_drop_;
}

ClarkResults ClarkAccumulator::finish() const {
    ClarkResults r;
    r.n_layers = n_layers_;
    r.n_heads = n_heads_;
    r.rows_keep = rows_keep_;
    r.rows_drop = rows_drop_;
    for (auto [sums, out] : {std::pair{&keep_, &r.keep}, std::pair{&drop_, &r.drop}}) {
        const Eigen::Index n = sums->rows();
        *out = Eigen::MatrixXd::Zero(n, n);
        for (Eigen::Index a = 0; a < n; ++a)
            for (Eigen::Index b = 0; b < a; ++b) (*out)(a, b) = (*out)(b, a) = (*sums)(a, b);
    }
    return r;
}

void ClarkAccumulator::save(BinaryWriter& w) const {
    w.tag("clark2019");
    w.put(n_layers_), w.put(n_heads_), w.put(rows_keep_), w.put(rows_drop_);
    w.put_doubles(keep_.data(), size_t(keep_.size()));
    w.put_doubles(drop_.data(), size_t(drop_.size()));
}

void ClarkAccumulator::load(BinaryReader& r) {
    r.expect_tag("clark2019");
    if (r.get<int64_t>() != n_layers_ || r.get<int64_t>() != n_heads_)
        r.fail("Clark accumulator of another model shape");
    const auto rows_keep = r.get<int64_t>(), rows_drop = r.get<int64_t>();
    if (rows_keep < 0 || rows_drop < 0) r.fail("negative row counts");
    r.get_doubles(keep_.data(), size_t(keep_.size()));
    r.get_doubles(drop_.data(), size_t(drop_.size()));
    rows_keep_ = rows_keep, rows_drop_ = rows_drop;
}

}  // namespace sinkscope::metrics
