// Exact reversal counting of one anchor by ranks (see reversal_ranks.hpp).
#include "metrics/reversal_ranks.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <utility>

#include "sinkscope/metrics/reversal.hpp"

namespace sinkscope::metrics::kernels {

namespace {

// Where kTieRelTol * M is a normal number with room to spare (kTieRelTol > 2^-40), so that the
// window's stop rule below rounds as its argument says; under it the scan goes on.
constexpr double kScanFloor = 0x1p-980;

}  // namespace

// order = the candidates c < m with a finite x[c], by ascending value (equal values by index):
// a stable least-significant-digit radix sort of the values' bits mapped to an unsigned order
// (sign bit set for positive values, all bits flipped for negative ones; -0 sorts just before
// +0, its equal, which the tie scan finds next to it), a byte a pass, skipping the bytes that
// every key shares (the exponent's, mostly). With std::sort of (value, index) pairs instead, the
// counting of BM_ReversalExactAll at 1,024 heads took 572 ms instead of 276 (bench/README.md).
void RankedAnchor::sort_finite(const double* x, int64_t m, std::vector<uint32_t>& order) {
    keys_.clear();
    order.clear();
    for (int64_t c = 0; c < m; ++c) {
        if (!std::isfinite(x[c])) continue;
        uint64_t bits = 0;
        std::memcpy(&bits, &x[c], sizeof bits);
        keys_.push_back(bits >> 63 ? ~bits : bits | uint64_t{1} << 63);
        order.push_back(static_cast<uint32_t>(c));
    }
    const size_t n = keys_.size();
    std::array<std::array<uint32_t, 256>, 8> count{};
    for (const uint64_t key : keys_)
        for (int d = 0; d < 8; ++d) ++count[static_cast<size_t>(d)][key >> (8 * d) & 255];
    key_tmp_.resize(n);
    order_tmp_.resize(n);
    for (int d = 0; d < 8; ++d) {
        auto& bucket = count[static_cast<size_t>(d)];
        if (n == 0 || bucket[keys_[0] >> (8 * d) & 255] == n) continue;  // one digit: in order
        uint32_t start = 0;
        for (uint32_t& b : bucket) start += std::exchange(b, start);
        for (size_t i = 0; i < n; ++i) {
            const uint32_t to = bucket[keys_[i] >> (8 * d) & 255]++;
            key_tmp_[to] = keys_[i];
            order_tmp_[to] = order[i];
        }
        keys_.swap(key_tmp_);
        order.swap(order_tmp_);
    }
}

// The finite values of row x sorted, their ranks, and the tie pairs T of the row.
//
// Tie pairs come from a window scan: for each y_i of the sorted values, the y_j after it until
// y_j - y_i > 2 tol_ij, tol_ij = kTieRelTol max(|y_i|, |y_j|) (rounded as computed), each checked
// with triple_verdict. No tie lies past that stop. Let u = 2^-53, t = kTieRelTol and
// M_j = max(|y_i|, |y_j|) >= kScanFloor. (1) The stop's rounded test implies the exact
// y_j - y_i > 2 t M_j (1 - u) / (1 + u) > 1.99 t M_j. (2) g(y) = y - y_i - 1.99 t max(|y_i|, |y|)
// does not decrease for y >= y_i (its slope is 1 or 1 - 1.99 t), so every later y_j' >= y_j has
// y_j' - y_i > 1.99 t M_j'. (3) M_j' >= M_j (|y_j| <= max(|y_i|, |y_j'|) for y_i <= y_j <= y_j'),
// so t M_j' is normal too, and a tie at j' would need fl(y_j' - y_i) <= fl(t M_j'), that is
// y_j' - y_i <= t M_j' (1 + u) / (1 - u) < 1.01 t M_j': a contradiction. Overflow of y_j - y_i
// to inf only makes the test true where the exact difference is huge.
bool RankedAnchor::prepare(const double* x, int64_t m, int64_t budget, Matrix& out) {
    sort_finite(x, m, out.order);
    // Equal values get different ranks (their order by index): such pairs are ties, counted as
    // discordant or not the same way twice (Fenwick and tie correction), so it cancels.
    const auto& order = out.order;
    out.rank.assign(static_cast<size_t>(m), 0);
    for (size_t p = 0; p < order.size(); ++p) out.rank[order[p]] = static_cast<uint32_t>(p + 1);
    out.ties.clear();
    int64_t scanned = 0;
    for (size_t i = 0; i < order.size(); ++i) {
        const double yi = x[order[i]];
        for (size_t j = i + 1; j < order.size(); ++j) {
            const double yj = x[order[j]];
            const double big = std::max(std::fabs(yi), std::fabs(yj));
            if (big >= kScanFloor && yj - yi > 2.0 * (kTieRelTol * big)) break;
            if (++scanned > budget) return false;
            if (triple_verdict(yi, yj) == 0) {
                const uint64_t b = std::min(order[i], order[j]);
                const uint64_t c = std::max(order[i], order[j]);
                out.ties.push_back(b << 32 | c);
            }
        }
    }
    std::sort(out.ties.begin(), out.ties.end());
    return true;
}

bool RankedAnchor::count(const AnchorRows& rows, const std::array<int, 2>* slots, int64_t n_slots,
                         int64_t* compared, int64_t* disagree, int64_t tie_scan_budget) {
    const int64_t m = rows.m;
    if (m < 2) return true;  // no candidate pairs
    matrices_.resize(static_cast<size_t>(rows.n_used));
    for (int64_t u = 0; u < rows.n_used; ++u)
        if (!prepare(rows.x + u * rows.stride, m, tie_scan_budget,
                     matrices_[static_cast<size_t>(u)]))
            return false;
    fenwick_.resize(static_cast<size_t>(m + 1));
    for (int64_t q = 0; q < n_slots; ++q) {
        const Matrix& mu = matrices_[static_cast<size_t>(slots[q][0])];
        const Matrix& mv = matrices_[static_cast<size_t>(slots[q][1])];
        // Discordant pairs of F: in u's order, the earlier candidates of higher v rank.
        std::fill(fenwick_.begin(), fenwick_.end(), 0);
        int64_t n = 0, discordant = 0;
        for (const uint32_t c : mu.order) {
            const int64_t r = mv.rank[c];
            if (r == 0) continue;  // not finite under v: not in F
            int64_t at_most = 0;   // earlier candidates with v rank <= r
            for (int64_t i = r; i > 0; i -= i & -i) at_most += fenwick_[static_cast<size_t>(i)];
            discordant += n - at_most;
            for (int64_t i = r; i <= m; i += i & -i) ++fenwick_[static_cast<size_t>(i)];
            ++n;
        }
        // The ties of u or v within F, and how many of them the Fenwick count called discordant.
        merged_.clear();
        std::set_union(mu.ties.begin(), mu.ties.end(), mv.ties.begin(), mv.ties.end(),
                       std::back_inserter(merged_));
        int64_t tied = 0, tied_discordant = 0;
        for (const uint64_t key : merged_) {
            const auto b = static_cast<uint32_t>(key >> 32), c = static_cast<uint32_t>(key);
            if (mu.rank[b] == 0 || mu.rank[c] == 0 || mv.rank[b] == 0 || mv.rank[c] == 0) continue;
            ++tied;
            const bool b_first = mu.rank[b] < mu.rank[c];
            tied_discordant += b_first ? mv.rank[b] > mv.rank[c] : mv.rank[c] > mv.rank[b];
        }
        compared[q] += n * (n - 1) / 2 - tied;
        disagree[q] += discordant - tied_discordant;
    }
    return true;
}

}  // namespace sinkscope::metrics::kernels
