// Path length and clustering of the thresholded attention graphs (metrics/graph_paths.hpp).
#include "sinkscope/metrics/graph_paths.hpp"

#include <algorithm>
#include <bit>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {
namespace {

using Word = uint64_t;
constexpr int64_t k_word_bits = 64;

// U as bitset rows (row i: the neighbours of i) and ascending neighbour lists.
struct Undirected {
    int64_t n = 0, words = 0;
    std::vector<Word> bits;                 // [n, words]
    std::vector<std::vector<int32_t>> adj;  // [n] neighbours, ascending
    int64_t n_set = 0, n_edges = 0;
    const Word* row(int64_t i) const { return bits.data() + i * words; }
    Word* row(int64_t i) { return bits.data() + i * words; }
};

// |N(u) & N(v)|: the hot loop of the clustering (O(m n / 64) words). x86-64 before
// x86-64-v2 has no popcount instruction, and std::popcount's fallback is several times slower:
// the function is compiled twice and the loader picks the popcnt one where the CPU has it.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("popcnt", "default")))
#endif
int64_t
common(const Word* a, const Word* b, int64_t words) {
    int64_t c = 0;
    for (int64_t w = 0; w < words; ++w) c += std::popcount(a[w] & b[w]);
    return c;
}

Undirected build(const Eigen::MatrixXd& a, double tau) {
    Undirected g;
    g.n = a.rows();
    g.words = (g.n + k_word_bits - 1) / k_word_bits;
    g.bits.assign(static_cast<size_t>(g.n * g.words), 0);
    for (int64_t j = 0; j < g.n; ++j)  // column-major: i inner
        for (int64_t i = 0; i < g.n; ++i) {
            if (!(a(i, j) > tau)) continue;
            ++g.n_set;
            if (i == j) continue;
            g.row(i)[j / k_word_bits] |= Word{1} << (j % k_word_bits);
            g.row(j)[i / k_word_bits] |= Word{1} << (i % k_word_bits);
        }
    g.adj.resize(static_cast<size_t>(g.n));
    for (int64_t i = 0; i < g.n; ++i) {
        auto& list = g.adj[static_cast<size_t>(i)];
        for (int64_t w = 0; w < g.words; ++w)
            for (Word x = g.row(i)[w]; x != 0; x &= x - 1)
                list.push_back(static_cast<int32_t>(w * k_word_bits + std::countr_zero(x)));
        g.n_edges += static_cast<int64_t>(list.size());
    }
    g.n_edges /= 2;
    return g;
}

GraphPaths measure(const Undirected& g) {
    GraphPaths r;
    r.n_set = g.n_set;
    r.n_edges = g.n_edges;
    const int64_t n = g.n;
    if (n == 0) return r;

    // Clustering: t_v = sum over neighbours u of |N(u) & N(v)| = 2 T_v (each edge's count serves
    // both ends); networkx's t / (d (d - 1)), summed in node order and divided by n.
    std::vector<int64_t> t(static_cast<size_t>(n), 0);
    for (int64_t v = 0; v < n; ++v)
        for (int32_t u : g.adj[static_cast<size_t>(v)]) {
            if (u <= v) continue;
            const int64_t c = common(g.row(u), g.row(v), g.words);
            t[v] += c;
            t[u] += c;
        }
    double clustering_sum = 0;
    for (int64_t v = 0; v < n; ++v) {
        const auto d = static_cast<int64_t>(g.adj[static_cast<size_t>(v)].size());
        if (d >= 2 && t[v] > 0)
            clustering_sum += static_cast<double>(t[v]) / static_cast<double>(d * (d - 1));
    }
    r.clustering = clustering_sum / static_cast<double>(n);

    // A search from every node s in ascending order, level by level (distances are the level
    // numbers, so the order of nodes within a level does not matter). A level either pushes, the
    // union of the frontier's neighbourhoods less the visited nodes (a node adds its neighbour
    // list or, when longer than a row, ORs its row), or, when that would cost more than 1/8 word
    // per unvisited node and row word, pulls: every unvisited node scans its row against the
    // frontier's bits up to the first hit (at most 8 times the push's cost, far less on dense
    // graphs, where the first word usually hits). Components are numbered by their lowest node
    // (the order networkx's connected_components yields them in).
    const Word last_mask =
        n % k_word_bits == 0 ? ~Word{0} : (Word{1} << (n % k_word_bits)) - 1;  // bits < n
    std::vector<int64_t> component(static_cast<size_t>(n), -1), size_of, distance_sum;
    std::vector<Word> visited(static_cast<size_t>(g.words)), next(static_cast<size_t>(g.words));
    std::vector<int32_t> frontier, reached;
    int64_t total_sum = 0, total_pairs = 0;
    for (int64_t s = 0; s < n; ++s) {
        std::fill(visited.begin(), visited.end(), 0);
        visited[s / k_word_bits] |= Word{1} << (s % k_word_bits);
        frontier.assign(1, static_cast<int32_t>(s));
        reached.clear();
        int64_t sum = 0;
        for (int64_t depth = 1; !frontier.empty(); ++depth) {
            int64_t push_cost = 0;
            for (int32_t u : frontier)
                push_cost += std::min<int64_t>(
                    static_cast<int64_t>(g.adj[static_cast<size_t>(u)].size()), g.words);
            const int64_t unvisited = n - 1 - static_cast<int64_t>(reached.size());
            std::fill(next.begin(), next.end(), 0);
            if (8 * push_cost > unvisited * g.words) {  // pull
                std::vector<Word>& frontier_bits = next;
                for (int32_t u : frontier)
                    frontier_bits[u / k_word_bits] |= Word{1} << (u % k_word_bits);
                std::vector<int32_t> found;
                for (int64_t w = 0; w < g.words; ++w) {
                    Word open = ~visited[w] & (w == g.words - 1 ? last_mask : ~Word{0});
                    for (; open != 0; open &= open - 1) {
                        const int64_t v = w * k_word_bits + std::countr_zero(open);
                        const Word* rv = g.row(v);
                        for (int64_t x = 0; x < g.words; ++x)
                            if (rv[x] & frontier_bits[x]) {
                                found.push_back(static_cast<int32_t>(v));
                                break;
                            }
                    }
                }
                for (int32_t v : found) visited[v / k_word_bits] |= Word{1} << (v % k_word_bits);
                frontier.swap(found);
            } else {  // push
                for (int32_t u : frontier) {
                    const auto& nu = g.adj[static_cast<size_t>(u)];
                    if (static_cast<int64_t>(nu.size()) < g.words) {
                        for (int32_t v : nu) next[v / k_word_bits] |= Word{1} << (v % k_word_bits);
                    } else {
                        const Word* ru = g.row(u);
                        for (int64_t w = 0; w < g.words; ++w) next[w] |= ru[w];
                    }
                }
                frontier.clear();
                for (int64_t w = 0; w < g.words; ++w) {
                    Word fresh = next[w] & ~visited[w];
                    visited[w] |= fresh;
                    for (; fresh != 0; fresh &= fresh - 1)
                        frontier.push_back(
                            static_cast<int32_t>(w * k_word_bits + std::countr_zero(fresh)));
                }
            }
            sum += depth * static_cast<int64_t>(frontier.size());
            reached.insert(reached.end(), frontier.begin(), frontier.end());
        }
        if (component[s] < 0) {
            const auto id = static_cast<int64_t>(size_of.size());
            component[s] = id;
            for (int32_t v : reached) component[v] = id;
            size_of.push_back(1 + static_cast<int64_t>(reached.size()));
            distance_sum.push_back(0);
        }
        distance_sum[component[s]] += sum;
        total_sum += sum;
        total_pairs += static_cast<int64_t>(reached.size());
    }
    // Integer sums and counts below 2^53 are exact doubles: each mean is one correctly rounded
    // division, as Python's int / int in networkx.
    if (total_pairs > 0)
        r.avg_shortest_path = static_cast<double>(total_sum) / static_cast<double>(total_pairs);
    if (n >= 2)
        r.reachable_share = static_cast<double>(total_pairs) /
                            (static_cast<double>(n) * static_cast<double>(n - 1));
    // The first of the largest components (lowest node first).
    const auto largest = std::max_element(size_of.begin(), size_of.end()) - size_of.begin();
    const int64_t k = size_of[largest];
    r.lcc_nodes = k;
    if (k >= 2)
        r.lcc_avg_shortest_path = static_cast<double>(distance_sum[largest]) /
                                  (static_cast<double>(k) * static_cast<double>(k - 1));
    return r;
}

}  // namespace

GraphPaths graph_paths(const Eigen::MatrixXd& a, double tau) {
    SS_CHECK(a.rows() == a.cols(), "graph of a non-square matrix");
    return measure(build(a, tau));
}

std::vector<GraphPaths> graph_paths_all(const Eigen::MatrixXd& a, const std::vector<double>& taus) {
    SS_CHECK(a.rows() == a.cols(), "graph of a non-square matrix");
    std::vector<GraphPaths> out;
    std::vector<Word> previous;
    for (double tau : taus) {
        Undirected g = build(a, tau);
        if (!out.empty() && g.bits == previous) {
            GraphPaths same = out.back();
            same.n_set = g.n_set;  // the self-loops may differ
            out.push_back(same);
            continue;
        }
        out.push_back(measure(g));
        previous = std::move(g.bits);
    }
    return out;
}

}  // namespace sinkscope::metrics
