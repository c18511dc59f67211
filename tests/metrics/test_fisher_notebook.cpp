// The Fisher notebook's name-based grouping (metrics/fisher_notebook.hpp; PAPERS.md B.8) on the
// names of real checkpoints: Llama (HF), GPT-2, GPT-NeoX and GGUF.
#include <cmath>

#include <gtest/gtest.h>

#include "sinkscope/metrics/fisher_notebook.hpp"

using namespace sinkscope::metrics;

TEST(FisherNotebook, LayerFromTheName) {
    EXPECT_EQ(notebook_fisher_layer("model.layers.3.self_attn.q_proj.weight", 12), 3);
    EXPECT_EQ(notebook_fisher_layer("model.layers.11.mlp.up_proj.weight", 12), 11);
    EXPECT_EQ(notebook_fisher_layer("bert.encoder.layer.2.attention.self.query.weight", 12), 2);
    EXPECT_EQ(notebook_fisher_layer("gpt_neox.layers.0.attention.dense.weight", 12), 0);
    EXPECT_EQ(notebook_fisher_layer("transformer.h.0.attn.c_attn.weight", 12), -1);  // GPT-2
    EXPECT_EQ(notebook_fisher_layer("blk.0.attn_q.weight", 12), -1);                 // GGUF
    EXPECT_EQ(notebook_fisher_layer("model.layers.12.mlp.up_proj.weight", 12), -1);  // k >= L
    EXPECT_EQ(notebook_fisher_layer("model.layers.01.mlp.weight", 12), -1);  // not "layers.1."
    EXPECT_EQ(notebook_fisher_layer("model.layers.3", 12), -1);              // no dot after k
    EXPECT_EQ(notebook_fisher_layer("model.embed_tokens.weight", 12), -1);
}

TEST(FisherNotebook, FirstMatchingGroup) {
    EXPECT_EQ(notebook_fisher_group("model.layers.0.self_attn.o_proj.weight"), "attention");
    EXPECT_EQ(notebook_fisher_group("model.layers.0.post_attention_layernorm.weight"),
              "attention");  // the notebook's quirk
    EXPECT_EQ(notebook_fisher_group("gpt_neox.layers.0.attention.dense.weight"), "attention");
    EXPECT_EQ(notebook_fisher_group("gpt_neox.layers.0.mlp.dense_h_to_4h.weight"), "mlp");
    EXPECT_EQ(notebook_fisher_group("transformer.h.0.mlp.c_fc.weight"), "mlp");
    EXPECT_EQ(notebook_fisher_group("Model.Layers.0.FFN.W1"), "mlp");  // case-insensitive
    EXPECT_EQ(notebook_fisher_group("model.embed_tokens.weight"), "embedding");
    EXPECT_EQ(notebook_fisher_group("transformer.wpe.weight"), "embedding");
    EXPECT_EQ(notebook_fisher_group("model.layers.0.input_layernorm.weight"), "");
    EXPECT_EQ(notebook_fisher_group("model.norm.weight"), "");
    EXPECT_EQ(notebook_fisher_group("lm_head.weight"), "");
}

// Sums: every tensor in exactly one layer bucket (a layer or other); groups as named; a fused
// tensor's "[part]" suffix is dropped before matching ("mlp_gate" would otherwise say mlp).
TEST(FisherNotebook, SumsAndShare) {
    const auto nb = notebook_fisher({{"model.embed_tokens.weight", 1.0},
                                     {"model.layers.0.self_attn.qkv_proj.weight[attn_q]", 2.0},
                                     {"model.layers.0.self_attn.qkv_proj.weight[attn_k]", 4.0},
                                     {"model.layers.0.mlp.down_proj.weight", 8.0},
                                     {"model.layers.1.input_layernorm.weight", 16.0},
                                     {"model.layers.1.gate_up.weight[mlp_gate]", 32.0},
                                     {"lm_head.weight", 64.0}},
                                    2);
    EXPECT_EQ(nb.layers.at(0), 14.0);
    EXPECT_EQ(nb.layers.at(1), 48.0);
    EXPECT_EQ(nb.other, 65.0);
    EXPECT_EQ(nb.attention, 6.0);
    EXPECT_EQ(nb.mlp, 8.0);  // "gate_up" matches no pattern once "[mlp_gate]" is dropped
    EXPECT_EQ(nb.embedding, 1.0);
    EXPECT_DOUBLE_EQ(nb.attention_share(), 6.0 / 14.0);
    EXPECT_TRUE(std::isnan(notebook_fisher({{"model.norm.weight", 1.0}}, 1).attention_share()));
}
