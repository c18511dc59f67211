// Vietoris-Rips persistence in dimensions 0 and 1 of a full distance matrix (spec 8
// "Persistent homology", 10.j), over Z/2, computed directly from the matrix: no simplex tree.
//
// Filtration: every vertex at 0, edge {i, j} at d_ij, triangle at the largest of its three edges
// (the flag complex up to dimension 2, the complex whose H1 the spec asks for). Simplices of
// equal value and dimension are ordered by decreasing combinatorial index (below); the diagram
// (bars of positive length) does not depend on that choice, only the zero-length pairs do.
//
// H0: Kruskal's algorithm. Edges in filtration order; an edge joining two components ends a
// bar [0, d) (all births are 0) and is a minimum spanning tree edge; one class never dies.
// H1: persistent cohomology (de Silva, Morozov, Vejdemo-Johansson 2011), the reduction that
// Bauer's Ripser popularised: columns are the edges that are not spanning-tree edges (the others
// would reduce to zero: "clearing"), taken in reverse filtration order; a column is the edge's
// coboundary (its n - 2 triangles) and its pivot is the earliest of them in the filtration. A
// column whose pivot is already another column's pivot gets that column added (mod 2) until its
// pivot is new; the pair (edge, pivot triangle) is the bar [d_edge, d_triangle). With every
// triangle present H1 of the whole complex is 0, so every column finds a pivot.
// Shortcut (Ripser's "emergent pairs"): no triangle on an edge comes before the edge's own value,
// so when the earliest-ordered triangle at exactly d_edge is not yet a pivot, it is the pivot
// and the column needs no reduction; cofacets are enumerated in decreasing index order, so the
// first one found at d_edge is that triangle. Most columns end there.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/topology.hpp"

namespace sinkscope::metrics {
namespace {

// Combinatorial indices: edge {i < j} -> C(j, 2) + i; triangle {i < j < k} ->
// C(k, 3) + C(j, 2) + i. A triangle with a larger top vertex has a larger index.
int64_t choose2(int64_t n) {
    return n * (n - 1) / 2;
}
int64_t choose3(int64_t n) {
    return n * (n - 1) * (n - 2) / 6;
}

struct Simplex {
    double value;
    int64_t index;
};
// Filtration order: smaller value first, then larger index.
bool before(const Simplex& a, const Simplex& b) {
    return a.value < b.value || (a.value == b.value && a.index > b.index);
}

class Rips {
public:
    explicit Rips(const Eigen::MatrixXd& d) : d_(d), n_(d.rows()) {}

    std::vector<PersistenceBar> run() {
        std::vector<PersistenceBar> bars;
        if (n_ == 0) return bars;
        std::vector<Simplex> edges;
        edges.reserve(static_cast<size_t>(choose2(n_)));
        for (int64_t j = 1; j < n_; ++j)
            for (int64_t i = 0; i < j; ++i) edges.push_back({d_(i, j), choose2(j) + i});
        std::sort(edges.begin(), edges.end(), before);
        // H0 (Kruskal); the other edges are the H1 columns.
        std::vector<int64_t> parent(static_cast<size_t>(n_));
        for (int64_t v = 0; v < n_; ++v) parent[static_cast<size_t>(v)] = v;
        auto find = [&](int64_t v) {
            while (parent[static_cast<size_t>(v)] != v) {
                auto& p = parent[static_cast<size_t>(v)];
                p = parent[static_cast<size_t>(p)];
                v = p;
            }
            return v;
        };
        std::vector<Simplex> columns;
        columns.reserve(edges.size() - static_cast<size_t>(n_ - 1));
        for (const Simplex& e : edges) {
            const auto [i, j] = vertices(e.index);
            const int64_t ri = find(i), rj = find(j);
            if (ri == rj) {
                columns.push_back(e);
                continue;
            }
            parent[static_cast<size_t>(std::max(ri, rj))] = std::min(ri, rj);
            if (e.value > 0.0) bars.push_back({0, 0.0, e.value});
        }
        bars.push_back({0, 0.0, std::numeric_limits<double>::infinity()});
        // H1: columns in reverse filtration order.
        std::reverse(columns.begin(), columns.end());
        for (const Simplex& e : columns) reduce(e, bars);
        sort_bars(bars);
        return bars;
    }

private:
    std::pair<int64_t, int64_t> vertices(int64_t edge) const {
        // j = the largest with C(j, 2) <= edge.
        auto j = static_cast<int64_t>(std::floor((1.0 + std::sqrt(1.0 + 8.0 * double(edge))) / 2));
        while (choose2(j) > edge) --j;
        while (choose2(j + 1) <= edge) ++j;
        return {edge - choose2(j), j};
    }

    // Calls fn(triangle) for the n - 2 cofacets of edge {i < j} in decreasing index order.
    template <class Fn>
    void for_cofacets(const Simplex& e, const Fn& fn) const {
        // Plain variables: clang rejects structured bindings captured by a lambda (before C++20's
        // P1091 was implemented).
        const std::pair<int64_t, int64_t> edge = vertices(e.index);
        const int64_t i = edge.first, j = edge.second;
        auto value = [&](int64_t v) { return std::max({e.value, d_(i, v), d_(j, v)}); };
        for (int64_t v = n_ - 1; v > j; --v)
            if (fn(Simplex{value(v), choose3(v) + choose2(j) + i})) return;
        for (int64_t v = j - 1; v > i; --v)
            if (fn(Simplex{value(v), choose3(j) + choose2(v) + i})) return;
        for (int64_t v = i - 1; v >= 0; --v)
            if (fn(Simplex{value(v), choose3(j) + choose2(i) + v})) return;
    }

    void reduce(const Simplex& e, std::vector<PersistenceBar>& bars) {
        // Emergent pair: the first cofacet at the edge's own value, if it is no pivot yet.
        bool found = false;
        Simplex first{};
        for_cofacets(e, [&](const Simplex& t) {
            if (t.value != e.value) return false;
            first = t;
            found = true;
            return true;
        });
        if (found && !pivot_of_.count(first.index)) {
            pivot_of_.emplace(first.index, e.index);
            return;  // a bar of length 0
        }
        // The column as a heap, earliest triangle on top; equal entries cancel in pairs (Z/2).
        auto later = [](const Simplex& a, const Simplex& b) { return before(b, a); };
        std::priority_queue<Simplex, std::vector<Simplex>, decltype(later)> column(later);
        std::vector<int64_t> added{e.index};  // the edges whose coboundaries sum to the column
        auto push = [&](const Simplex& edge) {
            for_cofacets(edge, [&](const Simplex& t) {
                column.push(t);
                return false;
            });
        };
        push(e);
        while (true) {
            const auto pivot = pop_pivot(column);
            SS_CHECK(pivot.has_value(), "rips persistence: the edge column of index ", e.index,
                     " reduced to zero although H1 of the full complex is 0");
            const auto it = pivot_of_.find(pivot->index);
            if (it == pivot_of_.end()) {
                pivot_of_.emplace(pivot->index, e.index);
                if (added.size() > 1) reduction_.emplace(e.index, std::move(added));
                if (pivot->value > e.value) bars.push_back({1, e.value, pivot->value});
                return;
            }
            column.push(*pivot);  // the sum below cancels it
            const int64_t other = it->second;
            const auto r = reduction_.find(other);
            const std::vector<int64_t> one{other};
            for (int64_t f : r == reduction_.end() ? one : r->second) {
                push(Simplex{edge_value(f), f});
                added.push_back(f);
            }
        }
    }

    template <class Heap>
    static std::optional<Simplex> pop_pivot(Heap& column) {
        while (!column.empty()) {
            const Simplex top = column.top();
            column.pop();
            if (column.empty() || column.top().index != top.index) return top;
            column.pop();  // a pair of equal entries: 0 mod 2
        }
        return std::nullopt;
    }

    double edge_value(int64_t edge) const {
        const auto [i, j] = vertices(edge);
        return d_(i, j);
    }

    const Eigen::MatrixXd& d_;
    int64_t n_;
    std::unordered_map<int64_t, int64_t> pivot_of_;                // triangle -> its column
    std::unordered_map<int64_t, std::vector<int64_t>> reduction_;  // column -> edges summed
};

}  // namespace

std::vector<PersistenceBar> rips_persistence(const Eigen::MatrixXd& dist) {
    SS_CHECK(dist.cols() == dist.rows(), "distance matrix is not square");
    SS_CHECK(dist.allFinite(), "rips persistence of a distance matrix with non-finite entries");
    return Rips(dist).run();
}

}  // namespace sinkscope::metrics
