// Reading and validating attention dumps (.npy, memory-mapped), one input at a time.
#include "sinkscope/analysis/attention_file.hpp"

#include <cmath>
#include <optional>
#include <sstream>
#include <utility>

#include "sinkscope/core/allocator.hpp"
#include "sinkscope/core/error.hpp"

namespace sinkscope::analysis {
using namespace metrics;

namespace {

std::string shape_string(const std::vector<int64_t>& s) {
    std::string out = "(";
    for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
    return out + (s.size() == 1 ? ",)" : ")");
}

std::string index_string(std::initializer_list<int64_t> idx) {
    std::string names = idx.size() == 4 ? "(n, l, h, i)" : "(n, l, h, i, j)";
    std::string out = names + " = (";
    size_t k = 0;
    for (int64_t v : idx) out += (k++ ? ", " : "") + std::to_string(v);
    return out + ")";
}

void require_float(const io::NpyMap& m) {
    if (m.dtype() != io::DType::F16 && m.dtype() != io::DType::F32 && m.dtype() != io::DType::F64)
        throw UnsupportedError(m.origin(), std::string("dtype ") + io::dtype_descr(m.dtype()) +
                                               " for attention (expected <f2, <f4 or <f8)");
}

std::vector<int64_t> read_ints(const io::NpyMap& m, const std::vector<int64_t>& want,
                               const std::string& what) {
    if (m.shape() != want)
        throw InputError(m.origin(), what + " shape " + shape_string(m.shape()) + ", expected " +
                                         shape_string(want));
    std::vector<int64_t> v(static_cast<size_t>(m.numel()));
    m.read_i64(0, m.numel(), v.data());
    return v;
}

}  // namespace

std::optional<Masking> parse_masking(const std::string& text) {
    if (text == "auto") return std::nullopt;
    if (text == "causal") return Masking::Causal;
    if (text == "bidirectional") return Masking::Bidirectional;
    throw UsageError("masking must be auto, causal or bidirectional");
}

AttentionFile::~AttentionFile() = default;

namespace {
AttentionArrays open_files(const AttentionFileOptions& o) {
    if (o.attention.empty()) throw UsageError("--attention is required");
    if (o.window < 0) throw UsageError("--window must be >= 0");
    AttentionArrays arrays;
    arrays.masking = o.masking;
    arrays.window = o.window;
    arrays.sum_tolerance = o.sum_tolerance;
    auto open = [](const std::filesystem::path& p) {
        return p.empty() ? nullptr : std::make_unique<io::NpyMap>(p);
    };
    arrays.attention = open(o.attention);
    arrays.scores = open(o.scores);
    arrays.lengths = open(o.lengths);
    arrays.token_ids = open(o.token_ids);
    return arrays;
}
}  // namespace

AttentionFile::AttentionFile(const AttentionFileOptions& o) : AttentionFile(open_files(o)) {}

AttentionFile::AttentionFile(AttentionArrays o)
    : window_(o.window), sum_tolerance_(o.sum_tolerance) {
    SS_CHECK(o.attention != nullptr, "AttentionArrays without attention");
    if (o.window < 0) throw UsageError("--window must be >= 0");
    if (!(o.sum_tolerance >= 0)) throw UsageError("the row-sum tolerance must be >= 0");
    attention_ = std::move(o.attention);
    const io::NpyMap& a = *attention_;
    require_float(a);
    const auto& s = a.shape();
    if (s.size() != 4 && s.size() != 5)
        throw InputError(a.origin(), "attention shape " + shape_string(s) + " has rank " +
                                         std::to_string(s.size()) +
                                         ", expected (N, L, H, T, T) or (L, H, T, T)");
    const size_t off = s.size() == 5 ? 1 : 0;
    n_inputs_ = s.size() == 5 ? s[0] : 1;
    n_layers_ = s[off];
    n_heads_ = s[off + 1];
    n_tokens_ = s[off + 2];
    if (s[off + 3] != n_tokens_)
        throw InputError(a.origin(), "attention shape " + shape_string(s) +
                                         ": the last two dimensions (query, key) must be equal");
    if (n_inputs_ == 0 || n_layers_ == 0 || n_heads_ == 0 || n_tokens_ == 0)
        throw InputError(a.origin(), "attention shape " + shape_string(s) + " is empty");

    if (o.scores) {
        scores_ = std::move(o.scores);
        require_float(*scores_);
        if (scores_->shape() != s)
            throw InputError(scores_->origin(), "scores shape " + shape_string(scores_->shape()) +
                                                    " differs from the attention's " +
                                                    shape_string(s));
    }
    if (o.lengths) {
        lengths_ = read_ints(*o.lengths, {n_inputs_}, "lengths");
        for (int64_t n = 0; n < n_inputs_; ++n)
            if (lengths_[n] < 1 || lengths_[n] > n_tokens_)
                throw InputError(o.lengths->origin(), "length of input " + std::to_string(n) +
                                                          " is " + std::to_string(lengths_[n]) +
                                                          ", outside [1, " +
                                                          std::to_string(n_tokens_) + "]");
    }
    if (o.token_ids) {
        std::vector<int64_t> want = {n_inputs_, n_tokens_};
        if (s.size() == 4 && o.token_ids->shape().size() == 1) want = {n_tokens_};
        token_ids_ = read_ints(*o.token_ids, want, "token ids");
    }

    if (o.masking) {
        masking_ = *o.masking;
    } else {
        // Causal iff every entry above the diagonal is exactly 0 (one pass, row by row).
        masking_detected_ = true;
        masking_ = Masking::Causal;
        std::vector<double> row(static_cast<size_t>(n_tokens_));  // [T]
        const int64_t n_rows = n_inputs_ * n_layers_ * n_heads_ * n_tokens_;
        for (int64_t r = 0; r < n_rows && masking_ == Masking::Causal; ++r) {
            const int64_t i = r % n_tokens_;
            if (i + 1 >= n_tokens_) continue;
            a.read_f64(r * n_tokens_ + i + 1, n_tokens_ - i - 1, row.data());
            for (int64_t j = 0; j < n_tokens_ - i - 1; ++j)
                if (row[j] != 0) {
                    masking_ = Masking::Bidirectional;
                    break;
                }
        }
    }
    if (o.window > 0 && masking_ != Masking::Causal)
        throw UsageError("--window applies to causal attention only");
}

std::shared_ptr<const StoredRows> AttentionFile::hold(int64_t n) const {
    const auto precision = [](const io::NpyMap& m) -> std::optional<StoredRows::Precision> {
        if (!m.c_order()) return std::nullopt;
        if (m.dtype() == io::DType::F32) return StoredRows::Precision::F32;
        if (m.dtype() == io::DType::F64) return StoredRows::Precision::F64;
        return std::nullopt;
    };
    const std::optional<StoredRows::Precision> p = precision(*attention_);
    if (!p || (scores_ && precision(*scores_) != p)) return nullptr;
    const auto per_layer = static_cast<size_t>(n_heads_ * n_tokens_ * n_tokens_);
    const size_t item = io::dtype_size(attention_->dtype());
    std::vector<const void*> pattern, scores;
    for (int64_t l = 0; l < n_layers_; ++l) {
        const size_t offset = static_cast<size_t>(n * n_layers_ + l) * per_layer * item;
        pattern.push_back(attention_->data() + offset);
        if (scores_) scores.push_back(scores_->data() + offset);
    }
    using Maps = std::pair<std::shared_ptr<const io::NpyMap>, std::shared_ptr<const io::NpyMap>>;
    return std::make_shared<const StoredRows>(*p, n_layers_, n_heads_, n_tokens_,
                                              std::move(pattern), std::move(scores),
                                              std::make_shared<const Maps>(attention_, scores_));
}

void AttentionFile::load(int64_t n, AttentionInput& x) const {
    SS_CHECK(n >= 0 && n < n_inputs_, "input ", n, " of ", n_inputs_);
    const int64_t t = n_tokens_, per_input = n_layers_ * n_heads_ * t * t;
    x.n_layers = n_layers_;
    x.n_heads = n_heads_;
    x.n_tokens = t;
    x.length = lengths_.empty() ? t : lengths_[n];
    x.masking = masking_;
    x.window = window_;
    x.source_owner = hold(n);
    x.source = x.source_owner.get();
    if (x.source) {
        std::vector<double>().swap(x.pattern);
        std::vector<double>().swap(x.scores);
    } else {
        // Huge pages for the first write of a large input (core/allocator.hpp); reused after.
        size_for_overwrite(x.pattern, static_cast<size_t>(per_input));
        attention_->read_f64(n * per_input, per_input, x.pattern.data());
        if (scores_) {
            size_for_overwrite(x.scores, static_cast<size_t>(per_input));
            scores_->read_f64(n * per_input, per_input, x.scores.data());
        } else {
            x.scores.clear();
        }
    }
    if (!token_ids_.empty())
        x.token_ids.assign(token_ids_.begin() + n * t, token_ids_.begin() + (n + 1) * t);
    else
        x.token_ids.clear();

    const std::string& file = attention_->origin();
    const double tol = sum_tolerance_;
    for (int64_t l = 0; l < n_layers_; ++l)
        for (int64_t h = 0; h < n_heads_; ++h)
            for (int64_t i = 0; i < x.length; ++i) {
                const double* a = x.row(l, h, i);
                const int64_t kb = x.key_begin(i), ke = x.key_end(i);
                double sum = 0;
                for (int64_t j = kb; j < ke; ++j) {
                    if (std::isnan(a[j]))
                        throw InputError(file,
                                         "NaN at visible entry " + index_string({n, l, h, i, j}));
                    if (!std::isfinite(a[j]) || a[j] < 0)
                        throw InputError(
                            file, "value " + std::to_string(a[j]) + " at visible entry " +
                                      index_string({n, l, h, i, j}) + " is not a probability");
                    sum += a[j];
                }
                if (!(std::abs(sum - 1.0) <= tol)) {
                    std::ostringstream msg;
                    msg.precision(9);
                    msg << "row " << index_string({n, l, h, i}) << " sums to " << sum
                        << " over its visible keys, not 1 (tolerance " << tol << ")";
                    throw InputError(file, msg.str());
                }
                if (!scores_) continue;
                const double* z = x.score_row(l, h, i);
                double z_max = -INFINITY;
                for (int64_t j = kb; j < ke; ++j) {
                    if (!std::isfinite(z[j]))
                        throw InputError(scores_->origin(), "non-finite score at visible entry " +
                                                                index_string({n, l, h, i, j}));
                    z_max = std::max(z_max, z[j]);
                }
                double norm = 0;
                for (int64_t j = kb; j < ke; ++j) norm += std::exp(z[j] - z_max);
                for (int64_t j = kb; j < ke; ++j) {
                    const double p = std::exp(z[j] - z_max) / norm;
                    if (std::abs(p - a[j]) > tol)
                        throw InputError(scores_->origin(),
                                         "softmax of the scores differs from the attention by " +
                                             std::to_string(std::abs(p - a[j])) + " at " +
                                             index_string({n, l, h, i, j}) + " (tolerance " +
                                             std::to_string(tol) + ")");
                }
            }
}

}  // namespace sinkscope::analysis
