// The layers whose attention the analyses read (`analyze --layers`): the forward still runs every
// layer, only the chosen ones are captured, and the analyses index them 0..size-1 internally.
// Every output names a layer by its index in the model (the pipeline maps the `layer` columns;
// section 8's rules of spec 10.n/10.o, "middle and late layers" and the compat layer subsets, are
// taken on the model's indices, metrics::RefFrameOptions::layer_ids).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sinkscope::analysis {

struct LayerSelection {
    std::vector<int64_t> ids;  // model layers analysed, ascending, distinct
    int64_t model_layers = 0;  // layers of the model

    // Every layer of a model of n layers.
    static LayerSelection every(int64_t n_layers);
    int64_t size() const { return static_cast<int64_t>(ids.size()); }
    bool all() const { return size() == model_layers; }
    // Canonical text: "all", or ranges "0-3,7,9-10".
    std::string spec() const;
};

// Whether model layers `ids` (ascending) follow one another: value space then reads one residual
// stream per boundary between them, else the pair around each (capture.hpp).
bool consecutive(const std::vector<int64_t>& ids);

// Checks the syntax of --layers (UsageError naming the option): "" or "all" (every layer), or a
// comma-separated list of layer indices N and inclusive ranges A-B, counted from 0.
void check_layer_spec(const std::string& spec);

// The selection `spec` makes in a model of `n_layers` layers, sorted and without repeats;
// UsageError when it names a layer the model does not have.
LayerSelection select_layers(const std::string& spec, int64_t n_layers);

}  // namespace sinkscope::analysis
