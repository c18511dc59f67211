// Options of the reference-frame accumulator (ref_frame.hpp): validation and the layers each
// analysis visits (spec 10.o).
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/metrics/ref_frame.hpp"

namespace sinkscope::metrics {

namespace {

void require(bool ok, const std::string& message) {
    if (!ok) throw UsageError(message);
}

std::string join_numbers(const std::vector<double>& v) {
    std::string s;
    for (double x : v) s += (s.empty() ? "" : ",") + format_number(x);
    return s;
}

}  // namespace

bool in_unit_interval(double v) {
    return std::isfinite(v) && v >= 0 && v <= 1;
}

void check_compat(const std::string& compat) {
    require(compat.empty() || compat == "ruscio2025",
            "--compat: unknown mode '" + compat + "' (known: ruscio2025)");
}

void check_symmetrize(const std::string& symmetrize) {
    require(symmetrize == "max" || symmetrize == "mean",
            "--symmetrize must be max or mean, got '" + symmetrize + "'");
}

void check_kl_rows(const std::string& kl_rows) {
    require(kl_rows == "paired" || kl_rows == "all",
            "--kl-rows must be paired or all, got '" + kl_rows + "'");
}

void check_topology_max_tokens(int64_t n) {
    require(n == 0 || n >= 2, "--topology-max-tokens must be 0 (never subsample) or >= 2");
}

void check_graph_thresholds(const std::vector<double>& v) {
    require(!v.empty() && std::all_of(v.begin(), v.end(), in_unit_interval),
            "--graph-thresholds must be numbers in [0, 1], got '" + join_numbers(v) + "'");
}

void check_sink_percentiles(const std::vector<double>& v) {
    require(!v.empty() && std::all_of(v.begin(), v.end(), in_unit_interval),
            "--sink-percentiles must be numbers in [0, 1], got '" + join_numbers(v) + "'");
}

void check_effective_density(double lo, double hi) {
    require(in_unit_interval(lo) && in_unit_interval(hi) && lo <= hi,
            "--effective-density must be LO,HI with 0 <= LO <= HI <= 1");
}

void check_long_bar(double long_bar) {
    require(std::isfinite(long_bar) && long_bar >= 0, "--long-bar must be a number >= 0");
}

void check_specialised_share(double share) {
    require(in_unit_interval(share), "--specialised-share must be in [0, 1]");
}

void check_specialised_min_inputs(int64_t n) {
    require(n >= 1, "--specialised-min-inputs must be >= 1");
}

void check_frame_share_first(double share) {
    require(in_unit_interval(share), "--frame-share-first must be in [0, 1]");
}

void check_frame_max_reference_count(double count) {
    require(std::isfinite(count), "--frame-max-reference-count must be a finite number");
}

void check_frame_verdict(const std::string& verdict) {
    require(verdict == "signatures" || verdict == "rule",
            "--frame-verdict must be signatures or rule");
}

void check_frame_reference_counts(const std::vector<double>& counts) {
    require(counts.size() == 3 && std::isfinite(counts[0]) && std::isfinite(counts[2]) &&
                counts[0] >= 1 && counts[0] < counts[1] && counts[1] < counts[2],
            "--frame-reference-counts must be C,D,B with 1 <= C < D < B");
}

void check_frame_min_margin(double margin) {
    require(in_unit_interval(margin), "--frame-min-margin must be in [0, 1]");
}

RefFrameConfig resolve_ref_frame_options(const RefFrameOptions& options) {
    RefFrameConfig c;
    const std::vector<std::string> known = ref_frame_members();
    std::stringstream ss(options.analyses);
    std::string item;
    int n_items = 0;
    std::vector<std::string> asked;
    while (std::getline(ss, item, ',')) {
        if (item == "all") {
            asked.insert(asked.end(), known.begin(), known.end());
        } else if (std::find(known.begin(), known.end(), item) != known.end()) {
            asked.push_back(item);
        } else {
            std::string list;
            for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
            throw UsageError("reference-frame analyses: unknown analysis '" + item +
                             "' (expected all, " + list + ")");
        }
        ++n_items;
    }
    for (const auto& k : known)  // in member order, once each
        if (std::find(asked.begin(), asked.end(), k) != asked.end()) c.analyses.push_back(k);
    if (n_items == 0) throw UsageError("reference-frame analyses: no analysis selected");
    check_compat(options.compat);
    c.compat = options.compat == "ruscio2025";
    check_symmetrize(options.symmetrize);
    c.symmetrize = options.symmetrize == "mean" ? Symmetrize::Mean : Symmetrize::Max;
    check_kl_rows(options.kl_rows);
    c.kl_all_rows = options.kl_rows == "all";
    if (options.sink.kind == SinkPolicy::Kind::Position && options.sink.position < 0)
        throw UsageError("sink position must be >= 0");
    if (options.threads < 1) throw UsageError("threads must be >= 1");
    check_topology_max_tokens(options.topology_max_tokens);
    const RefFrameConstants& k = options.constants;
    check_graph_thresholds(k.graph_thresholds);
    check_sink_percentiles(k.sink_percentiles);
    check_effective_density(k.effective_density_lo, k.effective_density_hi);
    check_long_bar(k.long_bar);
    check_specialised_share(k.specialised_share);
    check_specialised_min_inputs(k.specialised_min_inputs);
    check_frame_share_first(k.centralized_share_first);
    check_frame_max_reference_count(k.centralized_max_reference_count);
    check_frame_verdict(k.frame_verdict);
    check_frame_reference_counts(k.frame_reference_counts);
    check_frame_min_margin(k.frame_min_margin);
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

int64_t RefFrameConfig::mid_late_begin(int64_t n_layers) const {
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
