// Options of the section 8 accumulator (p2.hpp): validation and the layers each analysis
// visits (spec 10.o).
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/p2.hpp"

namespace sinkscope::metrics {

P2Config resolve_p2_options(const P2Options& options) {
    P2Config c;
    c.graphs = c.topology = c.kl = c.spectra = c.entropy = c.tokens = c.frame = false;
    std::stringstream ss(options.analyses);
    std::string item;
    int n_items = 0;
    while (std::getline(ss, item, ',')) {
        if (item == "graphs")
            c.graphs = true;
        else if (item == "topology")
            c.topology = true;
        else if (item == "kl")
            c.kl = true;
        else if (item == "spectra")
            c.spectra = true;
        else if (item == "entropy")
            c.entropy = true;
        else if (item == "tokens")
            c.tokens = true;
        else if (item == "frame")
            c.frame = true;
        else
            throw UsageError("section 8: unknown analysis '" + item +
                             "' (expected graphs, topology, kl, spectra, entropy, tokens, frame)");
        ++n_items;
    }
    if (n_items == 0) throw UsageError("section 8: no analysis selected");
    if (options.compat == "ruscio2025")
        c.compat = true;
    else if (!options.compat.empty())
        throw UsageError("compat: unknown mode '" + options.compat + "' (expected ruscio2025)");
    if (options.symmetrize == "max")
        c.symmetrize = Symmetrize::Max;
    else if (options.symmetrize == "mean")
        c.symmetrize = Symmetrize::Mean;
    else
        throw UsageError("symmetrize: expected max or mean, got '" + options.symmetrize + "'");
    if (options.kl_rows != "paired" && options.kl_rows != "all")
        throw UsageError("kl_rows: expected paired or all, got '" + options.kl_rows + "'");
    c.kl_all_rows = options.kl_rows == "all";
    if (options.sink.kind == SinkPolicy::Kind::Position && options.sink.position < 0)
        throw UsageError("sink position must be >= 0");
    if (options.threads < 1) throw UsageError("threads must be >= 1");
    if (options.topology_max_tokens < 0 || options.topology_max_tokens == 1)
        throw UsageError("topology_max_tokens must be 0 (never subsample) or >= 2");
    auto in_unit = [](const std::vector<double>& v) {
        return !v.empty() && std::all_of(v.begin(), v.end(), [](double x) {
            return std::isfinite(x) && x >= 0 && x <= 1;
        });
    };
    if (!in_unit(options.constants.graph_thresholds))
        throw UsageError("graph thresholds must be a non-empty list of numbers in [0, 1]");
    if (!in_unit(options.constants.sink_percentiles))
        throw UsageError("sink percentiles must be a non-empty list of numbers in [0, 1]");
    if (!(options.constants.effective_density_lo >= 0 &&
          options.constants.effective_density_lo <= options.constants.effective_density_hi &&
          options.constants.effective_density_hi <= 1))
        throw UsageError("effective density band must satisfy 0 <= lo <= hi <= 1");
    if (!(std::isfinite(options.constants.long_bar) && options.constants.long_bar >= 0))
        throw UsageError("long-bar persistence must be a finite number >= 0");
    if (!(options.constants.specialised_share >= 0 && options.constants.specialised_share <= 1))
        throw UsageError("specialised share must be in [0, 1]");
    if (!(options.constants.centralized_share_first >= 0 &&
          options.constants.centralized_share_first <= 1 &&
          std::isfinite(options.constants.centralized_max_reference_count)))
        throw UsageError("frame rule: share in [0, 1] and a finite reference count");
    if (options.constants.specialised_min_inputs < 1)
        throw UsageError("specialised minimum of inputs must be >= 1");
    c.per_head = options.per_head;
    c.sink = options.sink;
    c.topology_max_tokens = options.topology_max_tokens;
    c.tokens_file = options.tokens;
    c.constants = options.constants;
    for (size_t k = 0; k < options.layer_ids.size(); ++k)
        if (options.layer_ids[k] < 0 || options.layer_ids[k] >= options.model_layers ||
            (k > 0 && options.layer_ids[k] <= options.layer_ids[k - 1]))
            throw UsageError("the analysed layers must be ascending model layers");
    c.layer_ids = options.layer_ids;
    c.model_layers = options.model_layers;
    return c;
}

int64_t P2Config::mid_late_begin(int64_t n_layers) const {
    const int64_t first = model_layer_count(n_layers) / 3;
    int64_t l = 0;
    while (l < n_layers && layer_id(l) < first) ++l;
    return l;
}

std::vector<int64_t> topology_layers(int64_t n_layers, bool compat) {
    std::vector<int64_t> out;
    if (!compat) {
        for (int64_t l = 0; l < n_layers; ++l) out.push_back(l);
        return out;
    }
    const int64_t k = std::max<int64_t>(1, n_layers / 4);  // 10.o
    std::set<int64_t> s;
    for (int64_t l : {int64_t{0}, k, 2 * k, 3 * k, n_layers - 1})
        if (l >= 0 && l < n_layers) s.insert(l);
    return {s.begin(), s.end()};
}

std::vector<int64_t> kl_layers(int64_t n_layers, bool compat) {
    std::vector<int64_t> out;
    if (!compat || n_layers <= 6) {
        for (int64_t l = 0; l < n_layers; ++l) out.push_back(l);
        return out;
    }
    out.push_back(0);  // 10.o: 0, the odd layers below L-1, and L-1
    for (int64_t l = 1; l < n_layers - 1; l += 2) out.push_back(l);
    out.push_back(n_layers - 1);
    return out;
}

}  // namespace sinkscope::metrics
