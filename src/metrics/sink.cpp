// Sink policy parsing and resolution (spec 0, 10.d).
#include "sinkscope/metrics/sink.hpp"

#include <algorithm>
#include <cctype>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

SinkPolicy parse_sink_policy(const std::string& text) {
    SinkPolicy p;
    if (text == "auto")
        p.kind = SinkPolicy::Kind::Auto;
    else if (text == "first")
        p.kind = SinkPolicy::Kind::First;
    else if (text == "bos")
        p.kind = SinkPolicy::Kind::Bos;
    else if (text == "argmax")
        p.kind = SinkPolicy::Kind::Argmax;
    else if (!text.empty() && text.size() < 16 &&
             std::all_of(text.begin(), text.end(),
                         [](unsigned char c) { return std::isdigit(c); })) {
        p.kind = SinkPolicy::Kind::Position;
        p.position = std::stoll(text);
    } else {
        throw UsageError("sink must be auto, first, bos, argmax or a key position >= 0, got '" +
                         text + "'");
    }
    return p;
}

std::string to_string(const SinkPolicy& p) {
    switch (p.kind) {
        case SinkPolicy::Kind::Auto:
            return "auto";
        case SinkPolicy::Kind::First:
            return "first";
        case SinkPolicy::Kind::Bos:
            return "bos(id=" + std::to_string(p.bos_id) + ")";
        case SinkPolicy::Kind::Argmax:
            return "argmax";
        case SinkPolicy::Kind::Position:
            return "position(" + std::to_string(p.position) + ")";
    }
    return "?";
}

SinkPolicy resolve_auto(const SinkPolicy& policy, Masking masking) {
    if (policy.kind != SinkPolicy::Kind::Auto) return policy;
    SinkPolicy p = policy;
    p.kind = masking == Masking::Causal ? SinkPolicy::Kind::First : SinkPolicy::Kind::Argmax;
    return p;
}

std::vector<double> key_column_mean(const AttentionInput& x, int64_t layer) {
    std::vector<double> col(static_cast<size_t>(x.n_tokens), 0.0);  // [T]
    const int64_t l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? x.n_layers : layer + 1;
    int64_t n_rows = 0;
    std::vector<double> buffer;  // recomputed rows of a long input
    for (int64_t l = l0; l < l1; ++l)
        for (int64_t h = 0; h < x.n_heads; ++h)
            x.for_each_row(l, h, 0, x.length, buffer, [&](int64_t i, const double* a) {
                ++n_rows;
                const int64_t kb = x.key_begin(i), ke = x.key_end(i);
                double total = 0;
                for (int64_t j = kb; j < ke; ++j) total += a[j];
                if (!(total > 0)) return;
                for (int64_t j = kb; j < ke; ++j) col[j] += a[j] / total;
            });
    if (n_rows > 0)
        for (auto& c : col) c /= double(n_rows);
    return col;
}

namespace {
int64_t argmax(const std::vector<double>& v) {
    return static_cast<int64_t>(std::max_element(v.begin(), v.end()) - v.begin());
}
}  // namespace

SinkPositions resolve_sinks(const AttentionInput& x, const SinkPolicy& policy) {
    const SinkPolicy p = resolve_auto(policy, x.masking);
    SinkPositions out;
    out.per_layer.assign(static_cast<size_t>(x.n_layers), 0);
    switch (p.kind) {
        case SinkPolicy::Kind::Auto:
        case SinkPolicy::Kind::First:
            out.model = 0;
            break;
        case SinkPolicy::Kind::Position:
            out.model = p.position;
            break;
        case SinkPolicy::Kind::Bos: {
            if (x.token_ids.empty())
                throw UsageError("sink bos needs the token ids of every input");
            auto it = std::find(
                x.token_ids.begin(),
                x.token_ids.begin() + std::min<int64_t>(x.length, x.token_ids.size()), p.bos_id);
            if (it == x.token_ids.begin() + std::min<int64_t>(x.length, x.token_ids.size()))
                throw InputError("token ids", "no BOS token (id " + std::to_string(p.bos_id) +
                                                  ") among the input's tokens");
            out.model = it - x.token_ids.begin();  // several BOS: the first (10.d)
            break;
        }
        case SinkPolicy::Kind::Argmax: {
            // Every layer averages the same number of rows, so the model-wide column mean is the
            // mean of the per-layer ones.
            std::vector<double> model(static_cast<size_t>(x.n_tokens), 0.0);  // [T]
            for (int64_t l = 0; l < x.n_layers; ++l) {
                std::vector<double> col = key_column_mean(x, l);  // [T]
                out.per_layer[l] = argmax(col);
                for (int64_t j = 0; j < x.n_tokens; ++j) model[j] += col[j];
            }
            out.model = argmax(model);
            return out;
        }
    }
    std::fill(out.per_layer.begin(), out.per_layer.end(), out.model);
    return out;
}

}  // namespace sinkscope::metrics
