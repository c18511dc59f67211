// Fisher information of a model's parameters (spec section 8, Fisher): the trace of the diagonal
// Fisher per parameter tensor, aggregated by layer, by component (the role table of
// model/registry.hpp: embedding, attention q/k/v/o, mlp, norm, output) and per attention head
// (the head's rows of q/k/v and its columns of the output projection).
//
// For each sample n with scored rows (model/objective.hpp: next tokens for decoders, masked
// tokens for encoders, the image's class for ViT), L_n is the mean NLL of its labels and
//     F(theta) = (1 / N) sum_n || d L_n / d theta ||^2     (summed over the tensor's elements)
// empirical: the data's labels; true: labels drawn from the model's own distribution at each
// row, averaged over `draws` draws per sample. One sample per backward pass, so padding never
// enters a loss.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/io/table.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/objective.hpp"

namespace sinkscope::analysis {

enum class FisherKind { Empirical, True };
FisherKind parse_fisher_kind(const std::string& s);  // UsageError naming --kind
const char* fisher_kind_name(FisherKind k);          // "empirical" | "true"

struct FisherOptions {
    FisherKind kind = FisherKind::Empirical;
    int64_t draws = 1;  // true Fisher: label draws per sample
    uint64_t seed = 1;  // label draws
};

// One parameter tensor as the tables show it.
struct FisherTensor {
    std::string name;  // the checkpoint's tensor name ("<fused name>[attn_q]" for split parts)
    model::TensorRole role = model::TensorRole::TokenEmbed;
    int64_t layer = -1;
    int64_t numel = 0;
    int head_axis = -1;    // axis of the per-head d_head blocks (model::RoleInfo), -1: none
    int64_t n_blocks = 0;  // heads along head_axis (query or key/value heads)
};

struct FisherTables {
    io::Table fisher;                     // tables::kFisher
    io::Table tensors;                    // tables::kFisherTensors
    double total = 0;                     // trace over every parameter
    std::vector<double> attention_share;  // per layer: F_attn / (F_attn + F_mlp)
};

class FisherAccumulator {
public:
    explicit FisherAccumulator(const model::Model& m);

    // Adds sample `sample_index`'s squared gradients (one backward per label set). Returns false,
    // adding nothing, when the task scores no row.
    bool add(const model::Model& m, const model::PredictionTask& task, size_t sample_index,
             const FisherOptions& o);
    // Combines another accumulator of the same model (another shard of the data).
    void merge(const FisherAccumulator& other);

    int64_t n_samples() const { return n_; }
    const std::vector<FisherTensor>& tensors() const { return tensors_; }

    // The sums as JSON (for --resume: doubles round-trip exactly) and back; load_state throws
    // InputError naming `origin` when the state does not fit this model.
    nlohmann::json state() const;
    void load_state(const nlohmann::json& j, const std::string& origin);

    // Means over the samples; `model_name` fills the tables' model column.
    // `notebook`: also the released notebook's grouping (metrics/fisher_notebook.hpp), rows of
    // convention "ruscio2025".
    FisherTables finish(const model::ModelConfig& c, const std::string& model_name, FisherKind kind,
                        bool notebook = false) const;

private:
    void notebook_rows(const model::ModelConfig& c, const std::string& model_name,
                       FisherTables& out) const;

    std::vector<FisherTensor> tensors_;
    std::vector<double> sum_;                 // per tensor: sum over samples of ||g||^2
    std::vector<std::vector<double>> heads_;  // per tensor with head blocks: the same per block
    int64_t n_ = 0;
};

// Seed of the labels drawn for sample `sample_index`, draw `draw` (one stream per pair, so a
// resumed or sharded run draws the same labels).
uint64_t fisher_label_seed(uint64_t seed, size_t sample_index, int64_t draw);

}  // namespace sinkscope::analysis
