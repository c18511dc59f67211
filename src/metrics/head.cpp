// Head-level aggregation (spec 2, 10.d, 10.e, 10.g) as streaming, mergeable sums.
//
// Pass 1 (per query row set): every head's row quantities (spec 1) into row-major batches.
// Pass 2: per-head sums and the content/sink dispersion of each layer and of the model.
// Pass 3: pairwise sums. The Aitchison family is a root mean square: per pair, the sums over
//   rows of dA_perp^2 and of (b - b')^2, and dA^2 = dA_perp^2 + (b - b')^2 (spec 1: an identity
//   of the CLR, so it also holds exactly at head level). dA_perp^2 comes from the Gram matrix of
//   the content CLR vectors of a chunk of row sets placed side by side (columns centred over the
//   heads; distances are translation invariant): one matrix product per chunk, the pairs where
//   G_aa + G_bb - 2 G_ab cancels recomputed from the rows (pair_kernels.hpp states the bound);
//   (b - b')^2 directly. Classical metrics are means of per-row distances, from one vectorised
//   pass over every pair's parts per batch of row sets: Jensen-Shannon
//   JS = H(m) - (H(p) + H(q)) / 2 and, with the exact sum of squared differences of the same
//   pass, Euclidean and cosine. The pair loops are the SIMD kernels of pair_kernels.cpp, in
//   column blocks spread over n_threads threads.
#include "sinkscope/metrics/head.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <system_error>
#include <thread>
#include <utility>

#include <cblas.h>
#include <Eigen/Dense>

#include "metrics/pair_blocks.hpp"
#include "metrics/pair_kernels.hpp"
#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

int resolved_threads(int requested) {
    if (requested > 0) return requested;
    return std::max(1u, std::thread::hardware_concurrency());
}

Scope parse_scope(const std::string& text) {
    if (text == "model") return Scope::Model;
    if (text == "layer") return Scope::Layer;
    throw UsageError("scope must be model or layer, got '" + text + "'");
}
const char* to_string(Scope scope) {
    return scope == Scope::Model ? "model" : "layer";
}

namespace {

enum ClassicalIndex { kCosKeep, kCosDrop, kJsKeep, kJsDrop, kEucKeep, kEucDrop };

// Row quantities of every head for the current query row set, one row per head, and the
// probability rows of the last `slots` row sets stored part-major for the classical pair kernel,
// which takes a batch of row sets at a time (the [n, n] sums are read and written once per
// batch) with heads in the vector lanes.
struct RowBatch {
    int64_t n = 0, width = 0, slots = 0, ld = 0;
    RowMatrix p, pi, clr, content;  // [n, width]: first D (p, clr) or D-1 (pi, content) columns
    Eigen::VectorXd sink_mass, balance, entropy, binary_entropy, content_entropy,
        content_entropy_weighted, content_concentration;  // [n]
    // [slots * width, ld]: part j of slot s is row s * width + j, heads along it, zero past n.
    RowMatrix p_parts, pi_parts;
    // [slots * ld]: kernels::row_statistics of the queued heads, slot s at s * ld.
    Eigen::VectorXd self_keep, norm_keep, self_drop, norm_drop;
    void resize(int64_t n_heads, int64_t t, int64_t n_slots) {
        n = n_heads;
        width = std::max<int64_t>(t, 1);
        slots = n_slots;
        ld = n + kernels::kPad;
        for (auto* m : {&p, &pi, &clr, &content}) m->resize(n, width);
        for (auto* v : {&sink_mass, &balance, &entropy, &binary_entropy, &content_entropy,
                        &content_entropy_weighted, &content_concentration})
            v->resize(n);
        for (auto* m : {&p_parts, &pi_parts}) m->setZero(slots * width, ld);
        for (auto* v : {&self_keep, &norm_keep, &self_drop, &norm_drop}) v->setZero(slots * ld);
    }
};

// A row set of a RowBatch slot waiting for a group's classical pair kernel.
struct PendingRows {
    const RowBatch* batch = nullptr;
    int64_t slot = 0, d = 0;
};

// Content CLR vectors and sink balances of consecutive row sets of one group, side by side,
// waiting for the pair sums of squared Aitchison distances.
struct PairChunk {
    int64_t cap = 0, cap_balance = 0;  // columns
    RowMatrix content;                 // [group n, cap + kPad] uncentred
    RowMatrix balance;                 // [group n, cap_balance + kPad]
    int64_t n_content = 0, n_balance = 0;
};

// Scratch of the Gram products, reused over chunks.
struct GramScratch {
    RowMatrix centred;     // [n, k]
    Eigen::MatrixXd gram;  // [n, n] lower triangle
};

[[noreturn]] void throw_zero(const std::string& origin, int64_t n, int64_t l, int64_t h, int64_t i,
                             int64_t j) {
    throw InputError(origin, "exact zero at visible entry (n, l, h, i, j) = (" + std::to_string(n) +
                                 ", " + std::to_string(l) + ", " + std::to_string(h) + ", " +
                                 std::to_string(i) + ", " + std::to_string(j) +
                                 "): log-ratio metrics need the zero policy replace:DELTA (zeros "
                                 "option) (docs/metrics.md)");
}

// Sum of squared distances to the centroid, / n rows: (1/(2n^2)) sum_{a,b} ||x_a - x_b||^2.
template <typename Block>
double mean_sq_dev(const Block& x) {
    if (x.rows() == 0) return 0;
    Eigen::RowVectorXd mu = x.colwise().mean();
    return (x.rowwise() - mu).squaredNorm() / double(x.rows());
}

// Lower triangle (diagonal blocks whole) of G = X X^T for X [n, k]: one matrix product per
// fixed block of 64 columns, so the blocking, and with it every bit, is the same for any thread
// count. The products go to the system BLAS (OpenBLAS with the install script: kernels picked
// for the CPU at run time, several times Eigen's build-time SSE2 kernels). OpenBLAS's own split
// of a product depends on its thread count, and so do the last bits of G: the front ends run the
// analyses with it on one thread (core/system.hpp SingleThreadedBlas), so only --threads, which
// changes no bit, splits the work.
void gram_lower(const RowMatrix& x, Eigen::MatrixXd& g, int n_threads) {
    constexpr int64_t kBlock = 64;
    const int64_t n = x.rows(), k = x.cols();
    g.resize(n, n);
    if (k == 0) {  // no parts: every product is an empty sum (BLAS would refuse lda = 0)
        g.setZero();
        return;
    }
    const int ld_x = static_cast<int>(x.outerStride()), ld_g = static_cast<int>(g.outerStride());
    parallel_tasks((n + kBlock - 1) / kBlock, n_threads, [&](int64_t t) {
        const int64_t j0 = t * kBlock, w = std::min(kBlock, n - j0);
        // G[j0:, j0:j0+w] = X[j0:] X[j0:j0+w]^T; BLAS reads row-major X as X^T column-major.
        const double* rows = x.data() + j0 * ld_x;
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, static_cast<int>(n - j0),
                    static_cast<int>(w), static_cast<int>(k), 1.0, rows, ld_x, rows, ld_x, 0.0,
                    g.data() + j0 * ld_g + j0, ld_g);
    });
}

}  // namespace

// Kernels that need the accumulator's private state.
struct HeadKernel {
    using PairGroup = HeadAccumulator::PairGroup;

    // The sums a group of heads [first, first + size) of `model` would hold had it been
    // accumulated alone on the same rows: the diagonal block (the sums are per pair).
    static PairGroup block_of(const PairGroup& model, int64_t first, int64_t size) {
        PairGroup g;
        g.first_head = first;
        g.n = size;
        g.n_rows = model.n_rows;
        const int64_t at = first - model.first_head;
        g.sq_content = model.sq_content.block(at, at, size, size);
        g.sq_balance = model.sq_balance.block(at, at, size, size);
        for (size_t c = 0; c < g.classical.size(); ++c)
            g.classical[c] = model.classical[c].block(at, at, size, size);
        return g;
    }

    static void add_group(PairGroup& a, const PairGroup& b) {
        a.n_rows += b.n_rows;
        a.sq_content += b.sq_content;
        a.sq_balance += b.sq_balance;
        for (size_t k = 0; k < a.classical.size(); ++k) a.classical[k] += b.classical[k];
    }

    // Layer l's per-layer-sink sums of a model-scope accumulator (seeded from the model group
    // while no input has needed them).
    static PairGroup layer_sums(const HeadAccumulator& acc, int64_t l) {
        if (!acc.layer_groups_.empty()) return acc.layer_groups_[static_cast<size_t>(l)];
        return block_of(acc.groups_[0], l * acc.n_heads_, acc.n_heads_);
    }

    // Adds the chunk's squared content distances (centred Gram with recomputation) and squared
    // balance differences (directly) to the group's sums, and empties the chunk.
    static void flush(PairGroup& g, PairChunk& c, GramScratch& s, int n_threads) {
        const int64_t n = g.n;
        if (c.n_content > 0) {
            const int64_t k = c.n_content;
            c.content.middleCols(k, kernels::padded(k) - k).setZero();
            auto x = c.content.leftCols(k);
            Eigen::RowVectorXd mu = x.colwise().mean();
            s.centred = x.rowwise() - mu;
            gram_lower(s.centred, s.gram, n_threads);
            const kernels::Rows rows{c.content.data(), c.content.cols(), k};
            for_pair_blocks(n, n_threads, [&](int64_t b0, int64_t b1) {
                kernels::squared_pairs(rows, s.gram.data(), g.sq_content.data(), n, n, b0, b1);
            });
        }
        if (c.n_balance > 0) {
            const int64_t k = c.n_balance;
            c.balance.middleCols(k, kernels::padded(k) - k).setZero();
            const kernels::Rows rows{c.balance.data(), c.balance.cols(), k};
            for_pair_blocks(n, n_threads, [&](int64_t b0, int64_t b1) {
                kernels::squared_pairs(rows, nullptr, g.sq_balance.data(), n, n, b0, b1);
            });
        }
        c.n_content = c.n_balance = 0;
    }

    // Appends one row set (rows [first, first + n) of `b`, D parts) to the group's chunk.
    static void append(PairGroup& g, PairChunk& c, const RowBatch& b, int64_t d, GramScratch& s,
                       int n_threads) {
        if (c.n_content + d - 1 > c.cap || c.n_balance + 1 > c.cap_balance)
            flush(g, c, s, n_threads);
        c.content.middleCols(c.n_content, d - 1) = b.content.block(g.first_head, 0, g.n, d - 1);
        c.n_content += d - 1;
        c.balance.col(c.n_balance++) = b.balance.segment(g.first_head, g.n);
    }

    // Queues the current row set of `b` (D parts) for the group's classical metrics: its rows
    // into slot `slot` part-major and their statistics now, the pairs with the batch
    // (run_classical).
    static void queue_classical(const PairGroup& g, RowBatch& b, int64_t slot, int64_t d,
                                std::vector<PendingRows>& pending) {
        const int64_t first = g.first_head, n = g.n, part0 = slot * b.width,
                      at = slot * b.ld + first;
        b.p_parts.block(part0, first, d, n) = b.p.block(first, 0, n, d).transpose();
        b.pi_parts.block(part0, first, d - 1, n) = b.pi.block(first, 0, n, d - 1).transpose();
        kernels::row_statistics({&b.p_parts(part0, first), b.ld, d}, n, &b.self_keep(at),
                                &b.norm_keep(at));
        kernels::row_statistics({&b.pi_parts(part0, first), b.ld, d - 1}, n, &b.self_drop(at),
                                &b.norm_drop(at));
        pending.push_back({&b, slot, d});
    }

    // Classical metrics (keep on p, drop on pi) of the queued row sets, added to the group's
    // cosine / JS / Euclidean sums.
    static void run_classical(PairGroup& g, std::vector<PendingRows>& pending, int n_threads) {
        if (pending.empty()) return;
        std::vector<kernels::ClassicalRows> keep, drop;
        for (const PendingRows& q : pending) {
            const RowBatch& b = *q.batch;
            const int64_t first = g.first_head, part0 = q.slot * b.width,
                          at = q.slot * b.ld + first;
            keep.push_back(
                {{&b.p_parts(part0, first), b.ld, q.d}, &b.self_keep(at), &b.norm_keep(at)});
            drop.push_back(
                {{&b.pi_parts(part0, first), b.ld, q.d - 1}, &b.self_drop(at), &b.norm_drop(at)});
        }
        const int64_t n = g.n;
        auto args = [&](const std::vector<kernels::ClassicalRows>& sets, int cos, int js, int euc) {
            return kernels::ClassicalPairs{.sets = sets.data(),
                                           .n_sets = static_cast<int64_t>(sets.size()),
                                           .cos_sum = g.classical[cos].data(),
                                           .js_sum = g.classical[js].data(),
                                           .euc_sum = g.classical[euc].data(),
                                           .ld = n};
        };
        const auto args_keep = args(keep, kCosKeep, kJsKeep, kEucKeep);
        const auto args_drop = args(drop, kCosDrop, kJsDrop, kEucDrop);
        for_pair_blocks(n, n_threads, [&](int64_t b0, int64_t b1) {
            kernels::classical_pairs(args_keep, n, b0, b1);
            kernels::classical_pairs(args_drop, n, b0, b1);
        });
        pending.clear();
    }
};

HeadAccumulator::HeadAccumulator(int64_t n_layers, int64_t n_heads, HeadOptions options)
    : n_layers_(n_layers), n_heads_(n_heads), options_(std::move(options)) {
    if (n_layers <= 0 || n_heads <= 0)
        throw UsageError("a head accumulator needs n_layers > 0 and n_heads > 0");
    if (options_.min_parts < 2)
        throw UsageError("min_parts must be >= 2, got " + std::to_string(options_.min_parts));
    const int64_t n = n_layers * n_heads;
    head_sums_.assign(static_cast<size_t>(n), {});
    layer_disp_.assign(static_cast<size_t>(n_layers), {});
    position_sums_.assign(static_cast<size_t>(n_layers), {});
    if (options_.scope == Scope::Model) {
        groups_.push_back(PairGroup::zeros(0, n));
    } else {
        for (int64_t l = 0; l < n_layers; ++l)
            groups_.push_back(PairGroup::zeros(l * n_heads, n_heads));
    }
}

SinkPositions HeadAccumulator::add(const AttentionInput& x, int64_t input_index,
                                   const SinkPositions* given_sinks,
                                   std::vector<HeadMeans>* per_input) {
    const std::string& origin = options_.origin;
    const int64_t idx = input_index >= 0 ? input_index : counts_.n_inputs;
    SS_CHECK_INPUT(x.n_layers == n_layers_ && x.n_heads == n_heads_, origin, "input ", idx, " has ",
                   x.n_layers, " layers x ", x.n_heads, " heads, expected ", n_layers_, " x ",
                   n_heads_);
    const int64_t t = x.n_tokens, n_h = n_heads_, n = n_layers_ * n_heads_;
    SS_CHECK(!x.stored() || x.pattern.size() == size_t(n * t * t), "attention buffer of ",
             x.pattern.size(), " values for shape [", n_layers_, ", ", n_h, ", ", t, ", ", t, "]");
    SS_CHECK(!x.stored() || !x.has_scores() || x.scores.size() == x.pattern.size(),
             "scores buffer size ", x.scores.size(), " differs from the attention's ",
             x.pattern.size());
    SS_CHECK(x.length >= 0 && x.length <= t, "input length ", x.length, " outside [0, ", t, "]");

    const SinkPositions sinks = given_sinks ? *given_sinks : resolve_sinks(x, options_.sink);
    SS_CHECK(int64_t(sinks.per_layer.size()) == n_layers_, "sink positions of ",
             sinks.per_layer.size(), " layers for an input of ", n_layers_);
    std::vector<HeadSums> input_sums;  // this input's sums, for per_input
    if (per_input) input_sums.assign(static_cast<size_t>(n), {});
    bool shared_sink = true;  // every layer's sink equals the model-wide one
    for (int64_t l = 0; l < n_layers_; ++l)
        shared_sink = shared_sink && sinks.per_layer[l] == sinks.model;

    // Slots of the row batches: up to 16 row sets per classical pair pass, within ~32 MB of p
    // and pi rows per batch. Two of each: while the classical kernel runs on one full batch in
    // the background, the next row sets are composed into the other (with 2 cores the
    // composition used to leave one idle); the batches enter the sums in order, so every bit is
    // as with one. model_batches only when sinks differ.
    const int64_t n_slots =
        std::clamp<int64_t>((int64_t(1) << 25) / (2 * 8 * n * std::max<int64_t>(t, 1)), 1, 16);
    RowBatch layer_batches[2], model_batches[2];
    for (int k = 0; k < 2; ++k) {
        layer_batches[k].resize(n, t, n_slots);
        if (!shared_sink) model_batches[k].resize(n, t, n_slots);
    }
    int cur = 0;       // the batches being filled
    int64_t slot = 0;  // the current row set's slot in both of them
    std::vector<double> scratch(static_cast<size_t>(std::max<int64_t>(t, 1)));

    // Model scope, per-layer outputs (10.d): from the first input whose layer sinks differ from
    // the model-wide one, each layer's pairs are also summed with its own sink.
    if (options_.scope == Scope::Model && !shared_sink && layer_groups_.empty())
        for (int64_t l = 0; l < n_layers_; ++l)
            layer_groups_.push_back(HeadKernel::block_of(groups_[0], l * n_h, n_h));

    auto make_chunks = [&](const std::vector<PairGroup>& groups) {
        std::vector<PairChunk> chunks(groups.size());
        for (size_t g = 0; g < groups.size(); ++g) {
            const int64_t gn = groups[g].n;
            PairChunk& c = chunks[g];
            // >= 2T: one row set always fits; a row set has >= 2 content parts, so cap / 2 + 1
            // balance columns never run out first.
            c.cap = std::max<int64_t>(2 * t, std::clamp<int64_t>((1 << 21) / gn, 256, 4096));
            c.cap_balance = c.cap / 2 + 1;
            c.content.resize(gn, c.cap + kernels::kPad);
            c.balance.resize(gn, c.cap_balance + kernels::kPad);
        }
        return chunks;
    };
    std::vector<PairChunk> chunks = make_chunks(groups_);
    std::vector<PairChunk> layer_chunks = make_chunks(layer_groups_);
    std::vector<std::vector<PendingRows>> pending[2], layer_pending[2];
    for (int k = 0; k < 2; ++k) {
        pending[k].resize(groups_.size());
        layer_pending[k].resize(layer_groups_.size());
    }
    GramScratch scratch_gram;
    const int n_threads = resolved_threads(options_.n_threads);

    auto compose = [&](RowBatch& b, int64_t l, int64_t h, int64_t i, int64_t kb, int64_t d,
                       int64_t sink) {
        const int64_t r = l * n_h + h;
        RowOut o{&b.p(r, 0), &b.pi(r, 0), &b.clr(r, 0), &b.content(r, 0), 0, 0, 0, 0, 0, 0};
        if (x.has_scores()) {
            compose_row_scores(x.score_row(l, h, i) + kb, d, sink - kb, o);
        } else {
            int64_t zero = compose_row_probabilities(x.row(l, h, i) + kb, d, sink - kb,
                                                     options_.zeros, o, scratch.data());
            if (zero >= 0) throw_zero(origin, idx, l, h, i, kb + zero);
        }
        b.sink_mass(r) = o.sink_mass;
        b.balance(r) = o.sink_balance;
        b.entropy(r) = o.entropy;
        b.binary_entropy(r) = o.binary_sink_entropy;
        b.content_entropy(r) = o.content_entropy;
        // (1 - s) H(pi) with 1 - s summed from the content parts (accurate near s = 1).
        b.content_entropy_weighted(r) = o.content_mass * o.content_entropy;
        // ||clr(pi)||_2, the Aitchison norm of the content composition (spec 1 CLR), in part
        // order.
        double sq = 0;
        for (int64_t j = 0; j + 1 < d; ++j) sq += b.content(r, j) * b.content(r, j);
        b.content_concentration(r) = std::sqrt(sq);
    };
    auto dispersion = [](DispersionSums& acc, const RowBatch& b, int64_t first, int64_t m,
                         int64_t d) {
        acc.c_perp += mean_sq_dev(b.content.block(first, 0, m, d - 1));
        acc.v_b += mean_sq_dev(b.balance.segment(first, m));
        acc.n_rows += 1;
    };
    auto pairwise = [&](PairGroup& g, PairChunk& c, std::vector<PendingRows>& queue, RowBatch& b,
                        int64_t d) {
        HeadKernel::append(g, c, b, d, scratch_gram, n_threads);
        HeadKernel::queue_classical(g, b, slot, d, queue);
        g.n_rows += 1;
    };
    auto run_pending = [&](int k) {
        for (size_t g = 0; g < groups_.size(); ++g)
            HeadKernel::run_classical(groups_[g], pending[k][g], n_threads);
        for (size_t g = 0; g < layer_groups_.size(); ++g)
            HeadKernel::run_classical(layer_groups_[g], layer_pending[k][g], n_threads);
    };
    // The kernel's background thread (it only touches the full batches and the groups'
    // classical sums; the composition reads neither). Joined before the next batch is handed
    // over and before anything leaves add, an exception included.
    struct Background {
        std::thread thread;
        std::exception_ptr error;
        void wait() {
            if (thread.joinable()) thread.join();
            if (error) std::rethrow_exception(std::exchange(error, nullptr));
        }
        ~Background() {
            if (thread.joinable()) thread.join();
        }
    } kernel;
    auto hand_over = [&] {
        kernel.wait();
        const int k = cur;
        cur ^= 1;
        if (n_threads <= 1) {  // one thread asked for: no background thread either
            run_pending(k);
            return;
        }
        try {
            kernel.thread = std::thread([&run_pending, &kernel, k] {
                try {
                    run_pending(k);
                } catch (...) {
                    kernel.error = std::current_exception();
                }
            });
        } catch (const std::system_error&) {  // no thread to be had: run it here
            run_pending(k);
        }
    };

    // Progress in visible keys (a row's cost grows with its length).
    int64_t keys_total = 0, keys_done = 0;
    if (progress_)
        for (int64_t i = 0; i < x.length; ++i) keys_total += x.key_end(i) - x.key_begin(i);
    for (int64_t i = 0; i < x.length; ++i) {
        const int64_t kb = x.key_begin(i), ke = x.key_end(i), d = ke - kb;
        if (progress_) {
            if (i % 64 == 0) progress_("head metrics", keys_done, keys_total);
            keys_done += d;
        }
        counts_.rows_total += n;
        if (d < options_.min_parts) {
            counts_.rows_excluded += n;
            continue;
        }
        auto visible = [&](int64_t s) { return s >= kb && s < ke; };
        RowBatch &layer_batch = layer_batches[cur], &model_batch = model_batches[cur];
        // Pass 1: row quantities with each layer's sink (and the model-wide one if it differs).
        for (int64_t l = 0; l < n_layers_; ++l) {
            if (!visible(sinks.per_layer[l])) continue;
            for (int64_t h = 0; h < n_h; ++h)
                compose(layer_batch, l, h, i, kb, d, sinks.per_layer[l]);
        }
        const bool model_visible = visible(sinks.model);
        if (!shared_sink && model_visible)
            for (int64_t l = 0; l < n_layers_; ++l)
                for (int64_t h = 0; h < n_h; ++h) compose(model_batch, l, h, i, kb, d, sinks.model);
        RowBatch& model_rows = shared_sink ? layer_batch : model_batch;

        // Pass 2: head means and dispersion (per-layer sinks; model rho with the model sink).
        for (int64_t l = 0; l < n_layers_; ++l) {
            if (!visible(sinks.per_layer[l])) {
                counts_.sink_not_visible += n_h;
                continue;
            }
            counts_.rows_used += n_h;
            for (int64_t h = 0; h < n_h; ++h) {
                const int64_t r = l * n_h + h;
                auto accumulate = [&](HeadSums& s) {
                    s.sink_mass += layer_batch.sink_mass(r);
                    s.sink_balance += layer_batch.balance(r);
                    s.entropy += layer_batch.entropy(r);
                    s.binary_sink_entropy += layer_batch.binary_entropy(r);
                    s.content_entropy += layer_batch.content_entropy(r);
                    s.content_entropy_weighted += layer_batch.content_entropy_weighted(r);
                    s.content_concentration += layer_batch.content_concentration(r);
                    s.n_rows += 1;
                };
                accumulate(head_sums_[r]);
                if (per_input) accumulate(input_sums[r]);
                auto& ps = position_sums_[size_t(l)];
                if (ps.size() <= size_t(i)) ps.resize(size_t(i) + 1);
                ps[size_t(i)].sink_mass += layer_batch.sink_mass(r);
                ps[size_t(i)].n_rows += 1;
            }
            dispersion(layer_disp_[l], layer_batch, l * n_h, n_h, d);
        }
        if (model_visible) {
            counts_.rows_used_model += n;
            dispersion(model_disp_, model_rows, 0, n, d);
        } else {
            counts_.sink_not_visible_model += n;
        }

        // Pass 3: pairwise sums.
        if (options_.scope == Scope::Model) {
            if (model_visible) pairwise(groups_[0], chunks[0], pending[cur][0], model_rows, d);
            for (size_t l = 0; l < layer_groups_.size(); ++l)
                if (visible(sinks.per_layer[l]))
                    pairwise(layer_groups_[l], layer_chunks[l], layer_pending[cur][l], layer_batch,
                             d);
        } else {
            for (int64_t l = 0; l < n_layers_; ++l)
                if (visible(sinks.per_layer[l]))
                    pairwise(groups_[l], chunks[l], pending[cur][l], layer_batch, d);
        }
        if (++slot == n_slots) {
            hand_over();
            slot = 0;
        }
    }
    kernel.wait();
    run_pending(cur);
    for (size_t g = 0; g < groups_.size(); ++g)
        HeadKernel::flush(groups_[g], chunks[g], scratch_gram, n_threads);
    for (size_t g = 0; g < layer_groups_.size(); ++g)
        HeadKernel::flush(layer_groups_[g], layer_chunks[g], scratch_gram, n_threads);
    if (progress_) progress_("head metrics", keys_total, keys_total);
    counts_.n_inputs += 1;
    if (per_input) {
        per_input->assign(static_cast<size_t>(n), {});
        for (size_t r = 0; r < input_sums.size(); ++r) (*per_input)[r] = means_of(input_sums[r]);
    }
    return sinks;
}

void HeadAccumulator::merge(const HeadAccumulator& o) {
    if (o.n_layers_ != n_layers_ || o.n_heads_ != n_heads_ || o.options_.scope != options_.scope ||
        o.options_.min_parts != options_.min_parts ||
        to_string(o.options_.sink) != to_string(options_.sink) ||
        to_string(o.options_.zeros) != to_string(options_.zeros))
        throw UsageError("cannot merge head accumulators with different shapes or options");
    auto& c = counts_;
    const auto& oc = o.counts_;
    c.n_inputs += oc.n_inputs;
    c.rows_total += oc.rows_total;
    c.rows_used += oc.rows_used;
    c.rows_excluded += oc.rows_excluded;
    c.sink_not_visible += oc.sink_not_visible;
    c.rows_used_model += oc.rows_used_model;
    c.sink_not_visible_model += oc.sink_not_visible_model;
    for (size_t r = 0; r < head_sums_.size(); ++r) {
        auto& s = head_sums_[r];
        const auto& os = o.head_sums_[r];
        s.sink_mass += os.sink_mass;
        s.sink_balance += os.sink_balance;
        s.entropy += os.entropy;
        s.binary_sink_entropy += os.binary_sink_entropy;
        s.content_entropy += os.content_entropy;
        s.content_entropy_weighted += os.content_entropy_weighted;
        s.content_concentration += os.content_concentration;
        s.n_rows += os.n_rows;
    }
    for (size_t l = 0; l < position_sums_.size(); ++l) {
        auto& ps = position_sums_[l];
        const auto& ops = o.position_sums_[l];
        if (ps.size() < ops.size()) ps.resize(ops.size());
        for (size_t i = 0; i < ops.size(); ++i) {
            ps[i].sink_mass += ops[i].sink_mass;
            ps[i].n_rows += ops[i].n_rows;
        }
    }
    auto add_disp = [](DispersionSums& a, const DispersionSums& b) {
        a.c_perp += b.c_perp;
        a.v_b += b.v_b;
        a.n_rows += b.n_rows;
    };
    for (size_t l = 0; l < layer_disp_.size(); ++l) add_disp(layer_disp_[l], o.layer_disp_[l]);
    add_disp(model_disp_, o.model_disp_);
    // Per-layer-sink groups: a side that has not needed them yet contributes its model blocks.
    // (Taken before the model group below is merged.)
    if (!layer_groups_.empty() || !o.layer_groups_.empty()) {
        std::vector<PairGroup> merged;
        for (int64_t l = 0; l < n_layers_; ++l) {
            merged.push_back(HeadKernel::layer_sums(*this, l));
            HeadKernel::add_group(merged.back(), HeadKernel::layer_sums(o, l));
        }
        layer_groups_ = std::move(merged);
    }
    for (size_t g = 0; g < groups_.size(); ++g) HeadKernel::add_group(groups_[g], o.groups_[g]);
}

namespace {
// Head distances of each group's pairs into the NaN-initialised [n, n] matrices of `out`.
template <typename Group>
void fill_distances(const std::vector<Group>& groups, std::map<std::string, Eigen::MatrixXd>& out) {
    auto& d_a = out["dA"];
    auto& d_perp = out["dA_perp"];
    auto& d_sink = out["sink_term"];
    Eigen::MatrixXd* classical[6] = {&out["cosine_keep"],    &out["cosine_drop"],
                                     &out["js_keep"],        &out["js_drop"],
                                     &out["euclidean_keep"], &out["euclidean_drop"]};
    for (const auto& g : groups) {
        if (g.n_rows == 0) continue;
        const double k = 1.0 / double(g.n_rows);
        for (int64_t b = 0; b < g.n; ++b) {
            const int64_t gb = g.first_head + b;
            d_a(gb, gb) = d_perp(gb, gb) = d_sink(gb, gb) = 0;
            for (auto* m : classical) (*m)(gb, gb) = 0;
            for (int64_t a = b + 1; a < g.n; ++a) {
                const int64_t ga = g.first_head + a;
                const double sq_content = g.sq_content(a, b), sq_balance = g.sq_balance(a, b);
                d_a(ga, gb) = d_a(gb, ga) = std::sqrt((sq_content + sq_balance) * k);
                d_perp(ga, gb) = d_perp(gb, ga) = std::sqrt(sq_content * k);
                d_sink(ga, gb) = d_sink(gb, ga) = std::sqrt(sq_balance * k);
                for (size_t c = 0; c < 6; ++c)
                    (*classical[c])(ga, gb) = (*classical[c])(gb, ga) = g.classical[c](a, b) * k;
            }
        }
    }
}
}  // namespace

HeadMeans HeadAccumulator::means_of(const HeadSums& s) {
    HeadMeans m;
    m.n_rows = s.n_rows;
    const double k =
        s.n_rows > 0 ? 1.0 / double(s.n_rows) : std::numeric_limits<double>::quiet_NaN();
    m.sink_mass = s.sink_mass * k;
    m.sink_balance = s.sink_balance * k;
    m.entropy = s.entropy * k;
    m.binary_sink_entropy = s.binary_sink_entropy * k;
    m.content_entropy = s.content_entropy * k;
    m.content_entropy_weighted = s.content_entropy_weighted * k;
    m.content_concentration = s.content_concentration * k;
    return m;
}

HeadResults HeadAccumulator::finish() const {
    const int64_t n = n_layers_ * n_heads_;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    HeadResults r;
    r.n_layers = n_layers_;
    r.n_heads = n_heads_;
    r.scope = options_.scope;
    r.counts = counts_;
    for (int64_t l = 0; l < n_layers_; ++l)
        for (int64_t h = 0; h < n_heads_; ++h) r.heads.push_back({l, h});
    for (const auto& s : head_sums_) {
        r.means.push_back(means_of(s));
    }
    auto finish_disp = [&](const DispersionSums& s, int64_t layer) {
        Dispersion d;
        d.layer = layer;
        d.n_rows = s.n_rows;
        const double k = s.n_rows > 0 ? 1.0 / double(s.n_rows) : nan;
        d.c_perp = s.c_perp * k;
        d.v_b = s.v_b * k;
        const double total = d.c_perp + d.v_b;
        d.rho = total > 0 ? d.v_b / total : nan;
        return d;
    };
    for (int64_t l = 0; l < n_layers_; ++l) r.layers.push_back(finish_disp(layer_disp_[l], l));
    r.model = finish_disp(model_disp_, -1);
    for (int64_t l = 0; l < n_layers_; ++l) {
        const auto& ps = position_sums_[size_t(l)];
        for (size_t i = 0; i < ps.size(); ++i)
            if (ps[i].n_rows > 0)
                r.by_position.push_back(
                    {l, int64_t(i), ps[i].sink_mass / double(ps[i].n_rows), ps[i].n_rows});
    }

    for (const char* name : kDistanceNames)
        r.distances[name] = Eigen::MatrixXd::Constant(n, n, nan);
    fill_distances(groups_, r.distances);
    if (!layer_groups_.empty()) {
        for (const char* name : kDistanceNames)
            r.layer_distances[name] = Eigen::MatrixXd::Constant(n, n, nan);
        fill_distances(layer_groups_, r.layer_distances);
    }
    return r;
}

}  // namespace sinkscope::metrics
