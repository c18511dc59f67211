// Layer selection of `analyze --layers` (layers.hpp).
#include "sinkscope/analysis/layers.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope::analysis {

namespace {

[[noreturn]] void bad_spec(const std::string& spec, const std::string& why) {
    throw UsageError("--layers " + quote(spec) + ": " + why +
                     " (give layer indices from 0 and ranges, e.g. 0,5,10-12, or all)");
}

int64_t parse_index(const std::string& spec, std::string_view text) {
    int64_t v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0)
        bad_spec(spec, quote(text) + " is not a layer index");
    return v;
}

// The inclusive ranges of `spec`; empty for every layer.
std::vector<std::pair<int64_t, int64_t>> parse_ranges(const std::string& spec) {
    std::vector<std::pair<int64_t, int64_t>> out;
    if (spec.empty() || spec == "all") return out;
    size_t start = 0;
    while (true) {
        const size_t comma = spec.find(',', start);
        const std::string_view item = std::string_view(spec).substr(
            start, comma == std::string::npos ? std::string::npos : comma - start);
        const size_t dash = item.find('-');
        if (dash == std::string_view::npos) {
            const int64_t l = parse_index(spec, item);
            out.emplace_back(l, l);
        } else {
            const int64_t a = parse_index(spec, item.substr(0, dash));
            const int64_t b = parse_index(spec, item.substr(dash + 1));
            if (b < a) bad_spec(spec, "the range " + std::string(item) + " runs backwards");
            out.emplace_back(a, b);
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

}  // namespace

LayerSelection LayerSelection::every(int64_t n_layers) {
    LayerSelection s;
    s.model_layers = n_layers;
    for (int64_t l = 0; l < n_layers; ++l) s.ids.push_back(l);
    return s;
}

bool consecutive(const std::vector<int64_t>& ids) {
    for (size_t k = 1; k < ids.size(); ++k)
        if (ids[k] != ids[k - 1] + 1) return false;
    return true;
}

std::string LayerSelection::spec() const {
    if (all()) return "all";
    std::string out;
    for (size_t k = 0; k < ids.size();) {
        size_t e = k;
        while (e + 1 < ids.size() && ids[e + 1] == ids[e] + 1) ++e;
        if (!out.empty()) out += ",";
        out += std::to_string(ids[k]);
        if (e > k) out += "-" + std::to_string(ids[e]);
        k = e + 1;
    }
    return out;
}

void check_layer_spec(const std::string& spec) {
    parse_ranges(spec);
}

LayerSelection select_layers(const std::string& spec, int64_t n_layers) {
    const auto ranges = parse_ranges(spec);
    if (ranges.empty()) return LayerSelection::every(n_layers);
    LayerSelection s;
    s.model_layers = n_layers;
    for (const auto& [a, b] : ranges) {
        if (b >= n_layers)
            throw UsageError("--layers " + quote(spec) + ": the model has " +
                             std::to_string(n_layers) + " layers (0-" +
                             std::to_string(n_layers - 1) + "), so layer " + std::to_string(b) +
                             " does not exist");
        for (int64_t l = a; l <= b; ++l) s.ids.push_back(l);
    }
    std::sort(s.ids.begin(), s.ids.end());
    s.ids.erase(std::unique(s.ids.begin(), s.ids.end()), s.ids.end());
    return s;
}

}  // namespace sinkscope::analysis
