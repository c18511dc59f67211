// The released Fisher notebook's grouping of per-tensor Fisher traces (`fisher --compat
// ruscio2025`; spec/PAPERS.md B.8): layers and components found from the tensors' checkpoint
// names by substring, as the notebook finds them, instead of from the architecture's role table.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sinkscope::metrics {

// The layer k of a name holding "layers.<k>." or "layer.<k>." with k < n_layers; -1 otherwise.
int64_t notebook_fisher_layer(const std::string& name, int64_t n_layers);
// The first group whose pattern the lower-cased name contains: "attention" (attention, attn,
// self, q_proj, k_proj, v_proj), "mlp" (mlp, feed_forward, ffn, dense, fc), "embedding" (embed,
// token, wte, wpe); "" when none (layer norms and the rest are in no group).
std::string notebook_fisher_group(const std::string& name);

struct NotebookFisher {
    std::map<int64_t, double> layers;  // per layer k: the sum over its tensors
    double other = 0;                  // tensors of no layer
    double attention = 0, mlp = 0, embedding = 0;
    double attention_share() const;  // attention / (attention + mlp); NaN when both are 0
};
// `tensors`: (checkpoint name, Fisher trace) per tensor. A name's "[part]" suffix (a fused
// tensor's split part) is removed first: the notebook sees the checkpoint's tensor.
NotebookFisher notebook_fisher(const std::vector<std::pair<std::string, double>>& tensors,
                               int64_t n_layers);

}  // namespace sinkscope::metrics
