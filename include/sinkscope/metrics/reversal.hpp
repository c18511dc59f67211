// Reversal rates between head distance matrices (spec 3, 10.f): for anchor a and candidates
// {b, c}, do two distances agree on which candidate is nearer? Exact over all triples or sampled.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include <Eigen/Dense>

namespace sinkscope::metrics {

// Spec 10.f: D(a,b) and D(a,c) tie when |D(a,b) - D(a,c)| <= kTieRelTol * max(|D(a,b)|, |D(a,c)|).
inline constexpr double kTieRelTol = 1e-12;

// Verdict of one triple under one distance (spec 3): +1 when c is nearer to the anchor
// (d_ab > d_ac), -1 when b is nearer, 0 for a tie (spec 10.f).
int triple_verdict(double d_ab, double d_ac);

// Counts of one comparison (two distance matrices) over a set of triples.
struct ReversalCounts {
    int64_t n_triples = 0;  // triples (a; {b,c}) in the population of the scope
    int64_t n_examined =
        0;               // triples looked at: n_triples when exact, the sample size when sampled
    int64_t n_tied = 0;  // examined triples excluded because either verdict is a tie (10.f)
    int64_t n_compared = 0;  // n_examined - n_tied
    int64_t n_disagree = 0;  // compared triples whose two verdicts differ

    // Spec 10.f: disagreements / compared triples; NaN when nothing was compared.
    double rate() const;
    ReversalCounts& operator+=(const ReversalCounts& other);
};

// 95% Wilson score interval for a binomial proportion k / n; {NaN, NaN} when n == 0.
struct RateInterval {
    double lo;
    double hi;
};
RateInterval wilson_interval(int64_t k, int64_t n, double z = 1.959963984540054);

// One comparison: indices into the list of matrices handed to the counters.
struct MatrixPair {
    int first;
    int second;
};

// Number of triples (a; {b,c}), a not in {b,c}, among n heads: n (n-1) (n-2) / 2.
int64_t count_triples(int64_t n);

// Exact counts of every comparison in `pairs` over all triples whose three heads lie in `heads`
// (indices into the matrices; every head when empty). All matrices are n x n head distance
// matrices with the same n. Work is split over `n_threads` threads by anchor (0: all cores).
// Cost: O(n^2 log n) a comparison (each anchor's rows sorted, reversal.cpp), O(n^3) for the
// anchors whose distances have many ties (equal heads, for instance).
std::vector<ReversalCounts> count_reversals_exact(std::span<const Eigen::MatrixXd* const> matrices,
                                                  std::span<const MatrixPair> pairs,
                                                  std::span<const int> heads = {},
                                                  int n_threads = 1);

// `n_samples` distinct triples (a; {b, c}) of m heads drawn uniformly without replacement
// (seeded), as local indices {a, b, c} with b < c, in increasing triple order; every triple once
// when n_samples >= count_triples(m).
std::vector<std::array<int, 3>> sample_triples(int64_t m, int64_t n_samples, uint64_t seed);

// The same counts on the triples of sample_triples over `heads` (every comparison sees the same
// triples, so comparisons stay paired); n_examined = min(n_samples, n_triples).
std::vector<ReversalCounts> count_reversals_sampled(
    std::span<const Eigen::MatrixXd* const> matrices, std::span<const MatrixPair> pairs,
    int64_t n_samples, uint64_t seed, std::span<const int> heads = {});

// The 95% interval of a sampled rate, right for sampling without replacement: among n examined
// of N triples, the compared ones are a simple random sample of the population's compared
// triples, so the variance of the rate carries the finite population correction 1 - n/N; the
// interval is Wilson's score interval with z^2 scaled by that factor (z sqrt(1 - n/N)). It
// shrinks to the rate itself when every triple was examined (n = N: the exact count).
RateInterval sampled_rate_interval(const ReversalCounts& counts, double z = 1.959963984540054);

}  // namespace sinkscope::metrics
