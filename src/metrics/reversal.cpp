// Reversal rates (spec 3, 10.f): exact triple counting and uniform triple sampling.
//
// Sampled method: N distinct triples drawn uniformly without replacement (Floyd's algorithm over
// the triple indices), so N >= the number of triples examines each once; the rate's interval is
// Wilson's with the finite population correction of that design.
//
// Exact method. For a fixed anchor a the triples are the unordered pairs {b, c} of the other
// heads, and a comparison asks whether sign(D1(a,b) - D1(a,c)) and sign(D2(a,b) - D2(a,c))
// differ. Per anchor:
//   pass 1: copy row a of every matrix, without a itself, into a contiguous buffer;
//   pass 2: count by ranks (reversal_ranks.hpp): each row sorted once, the discordant pairs of
//           every comparison by a Fenwick tree as in Kendall's tau, and the pairs the relative
//           10.f tie rule makes ties (not transitive, so sorting alone cannot classify them)
//           found by a window scan of the sorted values and subtracted: O(m log m) per anchor
//           and comparison while ties are few;
//   otherwise (a row with many equal distances, e.g. identical heads), the pair loop: for each
//           b, the verdicts (+1, -1, 0 = tie) of every c > b under every matrix as two bit sets,
//           64 c to a word, from vector comparisons, and per comparison the counts of both
//           verdicts not a tie (compared) and opposite (disagree) by popcount
//           (reversal_kernels.hpp), O(m^2) per anchor.
// Anchors are split over threads. The result is exactly the brute-force triple loop either way
// (tests/metrics/test_reversal.cpp checks both paths against it).
#include "sinkscope/metrics/reversal.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <unordered_set>

#include "metrics/reversal_kernels.hpp"
#include "metrics/reversal_ranks.hpp"
#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

int triple_verdict(double d_ab, double d_ac) {
    const double diff = d_ab - d_ac;
    const double tol = kTieRelTol * std::max(std::fabs(d_ab), std::fabs(d_ac));
    return (diff > tol) - (diff < -tol);
}

double ReversalCounts::rate() const {
    if (n_compared == 0) return std::numeric_limits<double>::quiet_NaN();
    return static_cast<double>(n_disagree) / static_cast<double>(n_compared);
}

ReversalCounts& ReversalCounts::operator+=(const ReversalCounts& other) {
    n_triples += other.n_triples;
    n_examined += other.n_examined;
    n_tied += other.n_tied;
    n_compared += other.n_compared;
    n_disagree += other.n_disagree;
    return *this;
}

RateInterval wilson_interval(int64_t k, int64_t n, double z) {
    if (n <= 0) {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        return {nan, nan};
    }
    const double nn = static_cast<double>(n);
    const double p = static_cast<double>(k) / nn;
    const double z2 = z * z;
    const double denom = 1.0 + z2 / nn;
    const double center = (p + z2 / (2.0 * nn)) / denom;
    const double half = z / denom * std::sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn));
    // The interval always contains p (exactly 0 at k = 0 and 1 at k = n); clamp the rounding.
    return {std::clamp(center - half, 0.0, p), std::clamp(center + half, p, 1.0)};
}

int64_t count_triples(int64_t n) {
    return n < 3 ? 0 : n * (n - 1) * (n - 2) / 2;
}

namespace {

// Checks the matrices and the head subset; returns the heads to use (all when `heads` is empty).
std::vector<int> resolve_heads(std::span<const Eigen::MatrixXd* const> matrices,
                               std::span<const MatrixPair> pairs, std::span<const int> heads) {
    SS_CHECK(!matrices.empty(), "no distance matrices");
    const Eigen::Index n = matrices[0] ? matrices[0]->rows() : 0;
    for (const Eigen::MatrixXd* m : matrices) {
        SS_CHECK(m != nullptr, "null distance matrix");
        SS_CHECK(m->rows() == n && m->cols() == n, "distance matrices must all be ", n, " x ", n,
                 ", got ", m->rows(), " x ", m->cols());
    }
    for (const MatrixPair& p : pairs)
        SS_CHECK(p.first >= 0 && p.second >= 0 && p.first < static_cast<int>(matrices.size()) &&
                     p.second < static_cast<int>(matrices.size()),
                 "comparison refers to matrix ", p.first, " / ", p.second, " of ", matrices.size());
    std::vector<int> out;
    if (heads.empty()) {
        out.resize(static_cast<size_t>(n));
        for (Eigen::Index i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<int>(i);
    } else {
        out.assign(heads.begin(), heads.end());
        std::vector<int> sorted = out;
        std::sort(sorted.begin(), sorted.end());
        SS_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
                 "head subset has duplicates");
        SS_CHECK(sorted.front() >= 0 && sorted.back() < n, "head index out of range");
    }
    return out;
}

struct ExactPlan {
    std::vector<int> used;                 // matrix indices that appear in some comparison
    std::vector<std::array<int, 2>> slot;  // per comparison: slots into `used`
};

ExactPlan make_plan(size_t n_matrices, std::span<const MatrixPair> pairs) {
    ExactPlan plan;
    std::vector<int> slot_of(n_matrices, -1);
    for (const MatrixPair& p : pairs) {
        std::array<int, 2> s{};
        int k = 0;
        for (int idx : {p.first, p.second}) {
            if (slot_of[static_cast<size_t>(idx)] < 0) {
                slot_of[static_cast<size_t>(idx)] = static_cast<int>(plan.used.size());
                plan.used.push_back(idx);
            }
            s[static_cast<size_t>(k++)] = slot_of[static_cast<size_t>(idx)];
        }
        plan.slot.push_back(s);
    }
    return plan;
}

// Compared / disagree counts of every comparison for anchors heads[anchor_begin..anchor_end).
void count_anchor_range(std::span<const Eigen::MatrixXd* const> matrices, const ExactPlan& plan,
                        const std::vector<int>& heads, size_t anchor_begin, size_t anchor_end,
                        std::vector<int64_t>& compared, std::vector<int64_t>& disagree) {
    const int64_t n_used = static_cast<int64_t>(plan.used.size());
    const int64_t m = static_cast<int64_t>(heads.size()) - 1;  // candidates per anchor
    const int64_t w = kernels::kVerdictWord;
    const int64_t stride = (m + w - 1) / w * w;
    // [used matrix, candidate], NaN (no verdict) past the m candidates
    std::vector<double> rows(static_cast<size_t>(n_used * stride),
                             std::numeric_limits<double>::quiet_NaN());
    std::vector<uint64_t> words(static_cast<size_t>(2 * n_used * stride / w));
    const kernels::AnchorRows anchor{rows.data(), stride, m, n_used};
    kernels::RankedAnchor ranked;
    const int64_t budget = kernels::default_tie_scan_budget(m);
    const auto n_slots = static_cast<int64_t>(plan.slot.size());
    for (size_t ia = anchor_begin; ia < anchor_end; ++ia) {
        const int a = heads[ia];
        // Pass 1: the anchor's row of every used matrix, without the anchor.
        for (int64_t u = 0; u < n_used; ++u) {
            const Eigen::MatrixXd& d =
                *matrices[static_cast<size_t>(plan.used[static_cast<size_t>(u)])];
            double* row = rows.data() + u * stride;
            int64_t j = 0;
            for (size_t ib = 0; ib < heads.size(); ++ib)
                if (ib != ia) row[j++] = d(a, heads[ib]);
        }
        // Pass 2: by ranks, or by the pair loop where the tie scan exceeds its budget.
        if (!ranked.count(anchor, plan.slot.data(), n_slots, compared.data(), disagree.data(),
                          budget))
            kernels::count_anchor(anchor, plan.slot.data(), n_slots, words.data(), compared.data(),
                                  disagree.data());
    }
}

}  // namespace

std::vector<ReversalCounts> count_reversals_exact(std::span<const Eigen::MatrixXd* const> matrices,
                                                  std::span<const MatrixPair> pairs,
                                                  std::span<const int> heads, int n_threads) {
    const std::vector<int> hs = resolve_heads(matrices, pairs, heads);
    const int64_t n_triples = count_triples(static_cast<int64_t>(hs.size()));
    std::vector<ReversalCounts> out(pairs.size());
    if (n_triples == 0 || pairs.empty()) return out;

    const ExactPlan plan = make_plan(matrices.size(), pairs);
    if (n_threads <= 0)
        n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads = std::min<int>(n_threads, static_cast<int>(hs.size()));
    std::vector<std::vector<int64_t>> compared(static_cast<size_t>(n_threads),
                                               std::vector<int64_t>(pairs.size(), 0));
    std::vector<std::vector<int64_t>> disagree = compared;
    // Every anchor costs the same, so contiguous equal chunks balance the threads.
    auto chunk = [&](int t) {
        const size_t begin = hs.size() * static_cast<size_t>(t) / static_cast<size_t>(n_threads);
        const size_t end = hs.size() * static_cast<size_t>(t + 1) / static_cast<size_t>(n_threads);
        count_anchor_range(matrices, plan, hs, begin, end, compared[static_cast<size_t>(t)],
                           disagree[static_cast<size_t>(t)]);
    };
    if (n_threads == 1) {
        chunk(0);
    } else {
        std::vector<std::thread> workers;
        for (int t = 0; t < n_threads; ++t) workers.emplace_back(chunk, t);
        for (auto& w : workers) w.join();
    }
    for (size_t q = 0; q < pairs.size(); ++q) {
        ReversalCounts& c = out[q];
        c.n_triples = n_triples;
        c.n_examined = n_triples;
        for (int t = 0; t < n_threads; ++t) {
            c.n_compared += compared[static_cast<size_t>(t)][q];
            c.n_disagree += disagree[static_cast<size_t>(t)][q];
        }
        c.n_tied = c.n_examined - c.n_compared;
    }
    return out;
}

std::vector<std::array<int, 3>> sample_triples(int64_t m, int64_t n_samples, uint64_t seed) {
    SS_CHECK(m >= 0 && m <= std::numeric_limits<int>::max(), "head count ", m, " out of range");
    SS_CHECK(n_samples >= 0, "negative sample size ", n_samples);
    const int64_t n_triples = count_triples(m);
    const int64_t n = std::min(n_samples, n_triples);
    // Floyd's algorithm: a uniform n-subset of [0, n_triples) in n draws, each value once.
    std::mt19937_64 rng(seed);
    auto uniform_upto = [&rng](uint64_t last) {  // uniform integer in [0, last], no modulo bias
        if (last == std::numeric_limits<uint64_t>::max()) return rng();
        const uint64_t range = last + 1;
        const uint64_t limit =
            std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
        uint64_t r;
        do r = rng();
        while (r >= limit);
        return r % range;
    };
    std::unordered_set<int64_t> chosen;
    chosen.reserve(static_cast<size_t>(n));
    std::vector<int64_t> picked;
    picked.reserve(static_cast<size_t>(n));
    for (int64_t j = n_triples - n; j < n_triples; ++j) {
        const auto t = static_cast<int64_t>(uniform_upto(static_cast<uint64_t>(j)));
        const int64_t v = chosen.insert(t).second ? t : j;
        if (v == j) chosen.insert(j);
        picked.push_back(v);
    }
    std::sort(picked.begin(), picked.end());
    // Triple index = a * P + r, P = C(m-1, 2) pairs of the other heads; pair r = C(j, 2) + i with
    // i < j over the others in order (the anchor skipped).
    const int64_t per_anchor = (m - 1) * (m - 2) / 2;
    std::vector<std::array<int, 3>> out;
    out.reserve(picked.size());
    for (const int64_t idx : picked) {
        const int64_t a = idx / per_anchor;
        const int64_t r = idx % per_anchor;
        auto j = static_cast<int64_t>((1.0 + std::sqrt(1.0 + 8.0 * static_cast<double>(r))) / 2);
        while (j * (j - 1) / 2 > r) --j;
        while ((j + 1) * j / 2 <= r) ++j;
        const int64_t i = r - j * (j - 1) / 2;
        out.push_back({static_cast<int>(a), static_cast<int>(i >= a ? i + 1 : i),
                       static_cast<int>(j >= a ? j + 1 : j)});
    }
    return out;
}

RateInterval sampled_rate_interval(const ReversalCounts& counts, double z) {
    if (counts.n_triples <= 0 || counts.n_examined >= counts.n_triples) {
        const double p = counts.rate();
        return {p, p};
    }
    const double f = static_cast<double>(counts.n_examined) / static_cast<double>(counts.n_triples);
    return wilson_interval(counts.n_disagree, counts.n_compared, z * std::sqrt(1.0 - f));
}

std::vector<ReversalCounts> count_reversals_sampled(
    std::span<const Eigen::MatrixXd* const> matrices, std::span<const MatrixPair> pairs,
    int64_t n_samples, uint64_t seed, std::span<const int> heads) {
    SS_CHECK(n_samples >= 0, "negative sample size ", n_samples);
    const std::vector<int> hs = resolve_heads(matrices, pairs, heads);
    const int64_t n_triples = count_triples(static_cast<int64_t>(hs.size()));
    std::vector<ReversalCounts> out(pairs.size());
    for (ReversalCounts& c : out) c.n_triples = n_triples;
    if (n_triples == 0) return out;

    // Without replacement: each triple at most once, every comparison on the same triples.
    for (const std::array<int, 3>& t :
         sample_triples(static_cast<int64_t>(hs.size()), n_samples, seed)) {
        const int a = hs[static_cast<size_t>(t[0])];
        const int b = hs[static_cast<size_t>(t[1])];
        const int c = hs[static_cast<size_t>(t[2])];
        for (size_t q = 0; q < pairs.size(); ++q) {
            const Eigen::MatrixXd& d1 = *matrices[static_cast<size_t>(pairs[q].first)];
            const Eigen::MatrixXd& d2 = *matrices[static_cast<size_t>(pairs[q].second)];
            const int v1 = triple_verdict(d1(a, b), d1(a, c));
            const int v2 = triple_verdict(d2(a, b), d2(a, c));
            ReversalCounts& cnt = out[q];
            ++cnt.n_examined;
            if (v1 == 0 || v2 == 0) {
                ++cnt.n_tied;
                continue;
            }
            ++cnt.n_compared;
            cnt.n_disagree += v1 != v2;
        }
    }
    return out;
}

}  // namespace sinkscope::metrics
