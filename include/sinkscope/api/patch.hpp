// `sinkscope patch` (issue 52): activation patching. The target input is run again and again,
// each time with one hook (one layer's, or one head's part of it) replaced by its value in the
// source input's run, and a metric of the patched run's logits is tabled against the target's
// and the source's own values. Source and target must have the same number of tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinkscope/api/model_commands.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::api {

struct PatchOptions {
    ModelCliOptions m;
    std::string source, target;  // texts (encoded with the model's BOS policy)
    // Hook kinds swept, comma-separated: embed, resid_pre, resid_mid, resid_post, q, k, v, rot_q,
    // rot_k, attn_scores, pattern, z (the part after "hook_" of TransformerLens' names).
    std::string hook_kinds = "resid_pre,z";
    // nll: the mean NLL of the source's next tokens (every position), or with `answer` the NLL
    // of the answer token after the last position; logit_diff: logit(answer) - logit(wrong)
    // after the last position.
    std::string metric = "nll";
    std::string answer, wrong;  // one token each: its text, or #ID for a token id
    bool per_head = true;       // also patch each head (kv head for k, v, rot_k) alone
    bool per_position = false;  // also patch each position (query position of the squares)
    std::string out;
    bool overwrite = false;
    std::string command_line;
};

struct PatchSweep {
    io::Table table{std::vector<std::string>{}};
    double target_value = 0, source_value = 0;
};

// The sweep on token ids (the same length). Rows: per hook kind in `hook_kinds`' order, per
// layer, head -1 and position -1 (the whole hook), then each head, then each position; last, hook
// "*" (every hook of the model patched, which reproduces the source run). recovered = (value -
// target) / (source - target), NaN when the two are equal.
PatchSweep patch_sweep(const model::Model& m, const std::vector<int32_t>& source,
                       const std::vector<int32_t>& target, const PatchOptions& o);

// Loads the model, runs the sweep and writes <out>/patch.csv and run.json (all or nothing).
// Returns the output directory.
std::string run_patch(const PatchOptions& o);

}  // namespace sinkscope::api
