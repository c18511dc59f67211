// The architecture registry table and the tensor-name tables it points to (STYLE.md: every
// architecture and tensor-role name lives here and nowhere else).
#include "sinkscope/model/registry.hpp"

#include <iterator>
#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope::model {

namespace {

using R = TensorRole;

const TensorNames kHfLlamaNames = make_tensor_names({
    {R::TokenEmbed, "model.embed_tokens.weight"},
    {R::OutputNorm, "model.norm.weight"},
    {R::Output, "lm_head.weight"},
    {R::AttnNorm, "model.layers.{L}.input_layernorm.weight"},
    {R::AttnQ, "model.layers.{L}.self_attn.q_proj.weight"},
    {R::AttnK, "model.layers.{L}.self_attn.k_proj.weight"},
    {R::AttnV, "model.layers.{L}.self_attn.v_proj.weight"},
    {R::AttnO, "model.layers.{L}.self_attn.o_proj.weight"},
    {R::AttnQBias, "model.layers.{L}.self_attn.q_proj.bias"},
    {R::AttnKBias, "model.layers.{L}.self_attn.k_proj.bias"},
    {R::AttnVBias, "model.layers.{L}.self_attn.v_proj.bias"},
    {R::FfnNorm, "model.layers.{L}.post_attention_layernorm.weight"},
    {R::FfnGate, "model.layers.{L}.mlp.gate_proj.weight"},
    {R::FfnUp, "model.layers.{L}.mlp.up_proj.weight"},
    {R::FfnDown, "model.layers.{L}.mlp.down_proj.weight"},
    // sinkscope's own (config.json sinkscope_kv_bias; transformers has no such tensors)
    {R::AttnSlotK, "model.layers.{L}.self_attn.sink_key"},
    {R::AttnSlotV, "model.layers.{L}.self_attn.sink_value"},
});

// llama.cpp names (src/llama-arch.cpp LLM_TENSOR_NAMES).
const TensorNames kGgufLlamaNames = make_tensor_names({
    {R::TokenEmbed, "token_embd.weight"},
    {R::OutputNorm, "output_norm.weight"},
    {R::Output, "output.weight"},
    {R::AttnNorm, "blk.{L}.attn_norm.weight"},
    {R::AttnQ, "blk.{L}.attn_q.weight"},
    {R::AttnK, "blk.{L}.attn_k.weight"},
    {R::AttnV, "blk.{L}.attn_v.weight"},
    {R::AttnO, "blk.{L}.attn_output.weight"},
    {R::AttnQBias, "blk.{L}.attn_q.bias"},
    {R::AttnKBias, "blk.{L}.attn_k.bias"},
    {R::AttnVBias, "blk.{L}.attn_v.bias"},
    {R::FfnNorm, "blk.{L}.ffn_norm.weight"},
    {R::FfnGate, "blk.{L}.ffn_gate.weight"},
    {R::FfnUp, "blk.{L}.ffn_up.weight"},
    {R::FfnDown, "blk.{L}.ffn_down.weight"},
    {R::RopeFreqs, "rope_freqs.weight"},
});

// llama.cpp names of the LayerNorm decoders (src/llama-arch.cpp LLM_TENSOR_NAMES for
// LLM_ARCH_GPT2, LLM_ARCH_GPTNEOX, LLM_ARCH_PHI2; the converter writes "<name>.weight" and
// "<name>.bias"). One table: each family reads the roles it has (GPT-2 and GPT-NeoX the fused
// attn_qkv, Phi-2 attn_q/k/v; Phi-2 feeds attention and MLP from attn_norm and has no ffn_norm;
// only GPT-2 has position_embd).
const TensorNames kGgufLayerNormDecoderNames = make_tensor_names({
    {R::TokenEmbed, "token_embd.weight"},
    {R::PosEmbed, "position_embd.weight"},
    {R::OutputNorm, "output_norm.weight"},
    {R::OutputNormBias, "output_norm.bias"},
    {R::Output, "output.weight"},
    {R::OutputBias, "output.bias"},
    {R::AttnNorm, "blk.{L}.attn_norm.weight"},
    {R::AttnNormBias, "blk.{L}.attn_norm.bias"},
    {R::AttnQKV, "blk.{L}.attn_qkv.weight"},
    {R::AttnQKVBias, "blk.{L}.attn_qkv.bias"},
    {R::AttnQ, "blk.{L}.attn_q.weight"},
    {R::AttnK, "blk.{L}.attn_k.weight"},
    {R::AttnV, "blk.{L}.attn_v.weight"},
    {R::AttnQBias, "blk.{L}.attn_q.bias"},
    {R::AttnKBias, "blk.{L}.attn_k.bias"},
    {R::AttnVBias, "blk.{L}.attn_v.bias"},
    {R::AttnO, "blk.{L}.attn_output.weight"},
    {R::AttnOBias, "blk.{L}.attn_output.bias"},
    {R::FfnNorm, "blk.{L}.ffn_norm.weight"},
    {R::FfnNormBias, "blk.{L}.ffn_norm.bias"},
    {R::FfnUp, "blk.{L}.ffn_up.weight"},
    {R::FfnUpBias, "blk.{L}.ffn_up.bias"},
    {R::FfnDown, "blk.{L}.ffn_down.weight"},
    {R::FfnDownBias, "blk.{L}.ffn_down.bias"},
});

// Names given by io::open_llama2c to the run.c checkpoint layout.
const TensorNames kLlama2cNames = make_tensor_names({
    {R::TokenEmbed, "token_embedding_table"},
    {R::OutputNorm, "rms_final_weight"},
    {R::Output, "wcls"},
    {R::AttnNorm, "rms_att_weight.{L}"},
    {R::AttnQ, "wq.{L}"},
    {R::AttnK, "wk.{L}"},
    {R::AttnV, "wv.{L}"},
    {R::AttnO, "wo.{L}"},
    {R::FfnNorm, "rms_ffn_weight.{L}"},
    {R::FfnGate, "w1.{L}"},
    {R::FfnUp, "w3.{L}"},
    {R::FfnDown, "w2.{L}"},
});

// HF Gemma2ForCausalLM (modeling_gemma2.py): Llama names plus the sandwich norms; its
// post_attention_layernorm is the norm of the attention output, pre_feedforward_layernorm the
// MLP's input norm (FfnNorm).
const TensorNames kHfGemma2Names = make_tensor_names({
    {R::TokenEmbed, "model.embed_tokens.weight"},
    {R::OutputNorm, "model.norm.weight"},
    {R::Output, "lm_head.weight"},
    {R::AttnNorm, "model.layers.{L}.input_layernorm.weight"},
    {R::AttnQ, "model.layers.{L}.self_attn.q_proj.weight"},
    {R::AttnK, "model.layers.{L}.self_attn.k_proj.weight"},
    {R::AttnV, "model.layers.{L}.self_attn.v_proj.weight"},
    {R::AttnO, "model.layers.{L}.self_attn.o_proj.weight"},
    {R::AttnPostNorm, "model.layers.{L}.post_attention_layernorm.weight"},
    {R::FfnNorm, "model.layers.{L}.pre_feedforward_layernorm.weight"},
    {R::FfnGate, "model.layers.{L}.mlp.gate_proj.weight"},
    {R::FfnUp, "model.layers.{L}.mlp.up_proj.weight"},
    {R::FfnDown, "model.layers.{L}.mlp.down_proj.weight"},
    {R::FfnPostNorm, "model.layers.{L}.post_feedforward_layernorm.weight"},
});

// llama.cpp gemma2 names (src/llama-arch.cpp: LLM_TENSOR_ATTN_POST_NORM "post_attention_norm",
// LLM_TENSOR_FFN_NORM = pre-feedforward, LLM_TENSOR_FFN_POST_NORM "post_ffw_norm").
const TensorNames kGgufGemma2Names = make_tensor_names({
    {R::TokenEmbed, "token_embd.weight"},
    {R::OutputNorm, "output_norm.weight"},
    {R::Output, "output.weight"},
    {R::AttnNorm, "blk.{L}.attn_norm.weight"},
    {R::AttnQ, "blk.{L}.attn_q.weight"},
    {R::AttnK, "blk.{L}.attn_k.weight"},
    {R::AttnV, "blk.{L}.attn_v.weight"},
    {R::AttnO, "blk.{L}.attn_output.weight"},
    {R::AttnPostNorm, "blk.{L}.post_attention_norm.weight"},
    {R::FfnNorm, "blk.{L}.ffn_norm.weight"},
    {R::FfnGate, "blk.{L}.ffn_gate.weight"},
    {R::FfnUp, "blk.{L}.ffn_up.weight"},
    {R::FfnDown, "blk.{L}.ffn_down.weight"},
    {R::FfnPostNorm, "blk.{L}.post_ffw_norm.weight"},
});

// HF Phi3ForCausalLM (modeling_phi3.py): fused qkv_proj [q; k; v] and gate_up_proj [gate; up].
const TensorNames kHfPhi3Names = make_tensor_names({
    {R::TokenEmbed, "model.embed_tokens.weight"},
    {R::OutputNorm, "model.norm.weight"},
    {R::Output, "lm_head.weight"},
    {R::AttnNorm, "model.layers.{L}.input_layernorm.weight"},
    {R::AttnQKV, "model.layers.{L}.self_attn.qkv_proj.weight"},
    {R::AttnO, "model.layers.{L}.self_attn.o_proj.weight"},
    {R::FfnNorm, "model.layers.{L}.post_attention_layernorm.weight"},
    {R::FfnGateUp, "model.layers.{L}.mlp.gate_up_proj.weight"},
    {R::FfnDown, "model.layers.{L}.mlp.down_proj.weight"},
});

// llama.cpp phi3 names: attn_qkv, ffn_up holding [gate; up] (LLM_FFN_SWIGLU splits it), and the
// longrope divisors rope_factors_short / rope_factors_long.
const TensorNames kGgufPhi3Names = make_tensor_names({
    {R::TokenEmbed, "token_embd.weight"},
    {R::OutputNorm, "output_norm.weight"},
    {R::Output, "output.weight"},
    {R::AttnNorm, "blk.{L}.attn_norm.weight"},
    {R::AttnQKV, "blk.{L}.attn_qkv.weight"},
    {R::AttnO, "blk.{L}.attn_output.weight"},
    {R::FfnNorm, "blk.{L}.ffn_norm.weight"},
    {R::FfnGateUp, "blk.{L}.ffn_up.weight"},
    {R::FfnDown, "blk.{L}.ffn_down.weight"},
    {R::RopeFactorsShort, "rope_factors_short.weight"},
    {R::RopeFactorsLong, "rope_factors_long.weight"},
});

// HF GPT2LMHeadModel (Conv1D weights stored [in, out]; lm_head.weight only when untied).
const TensorNames kHfGpt2Names = make_tensor_names({
    {R::TokenEmbed, "transformer.wte.weight"},
    {R::PosEmbed, "transformer.wpe.weight"},
    {R::OutputNorm, "transformer.ln_f.weight"},
    {R::OutputNormBias, "transformer.ln_f.bias"},
    {R::Output, "lm_head.weight"},
    {R::AttnNorm, "transformer.h.{L}.ln_1.weight"},
    {R::AttnNormBias, "transformer.h.{L}.ln_1.bias"},
    {R::AttnQKV, "transformer.h.{L}.attn.c_attn.weight"},
    {R::AttnQKVBias, "transformer.h.{L}.attn.c_attn.bias"},
    {R::AttnO, "transformer.h.{L}.attn.c_proj.weight"},
    {R::AttnOBias, "transformer.h.{L}.attn.c_proj.bias"},
    {R::FfnNorm, "transformer.h.{L}.ln_2.weight"},
    {R::FfnNormBias, "transformer.h.{L}.ln_2.bias"},
    {R::FfnUp, "transformer.h.{L}.mlp.c_fc.weight"},
    {R::FfnUpBias, "transformer.h.{L}.mlp.c_fc.bias"},
    {R::FfnDown, "transformer.h.{L}.mlp.c_proj.weight"},
    {R::FfnDownBias, "transformer.h.{L}.mlp.c_proj.bias"},
    // sinkscope's own (config.json sinkscope_kv_bias; transformers has no such tensors)
    {R::AttnSlotK, "transformer.h.{L}.attn.sink_key"},
    {R::AttnSlotV, "transformer.h.{L}.attn.sink_value"},
});

// HF GPTNeoXForCausalLM (query_key_value rows interleaved per head: src/model/gpt_neox.cpp).
const TensorNames kHfGptNeoxNames = make_tensor_names({
    {R::TokenEmbed, "gpt_neox.embed_in.weight"},
    {R::OutputNorm, "gpt_neox.final_layer_norm.weight"},
    {R::OutputNormBias, "gpt_neox.final_layer_norm.bias"},
    {R::Output, "embed_out.weight"},
    {R::AttnNorm, "gpt_neox.layers.{L}.input_layernorm.weight"},
    {R::AttnNormBias, "gpt_neox.layers.{L}.input_layernorm.bias"},
    {R::AttnQKV, "gpt_neox.layers.{L}.attention.query_key_value.weight"},
    {R::AttnQKVBias, "gpt_neox.layers.{L}.attention.query_key_value.bias"},
    {R::AttnO, "gpt_neox.layers.{L}.attention.dense.weight"},
    {R::AttnOBias, "gpt_neox.layers.{L}.attention.dense.bias"},
    {R::FfnNorm, "gpt_neox.layers.{L}.post_attention_layernorm.weight"},
    {R::FfnNormBias, "gpt_neox.layers.{L}.post_attention_layernorm.bias"},
    {R::FfnUp, "gpt_neox.layers.{L}.mlp.dense_h_to_4h.weight"},
    {R::FfnUpBias, "gpt_neox.layers.{L}.mlp.dense_h_to_4h.bias"},
    {R::FfnDown, "gpt_neox.layers.{L}.mlp.dense_4h_to_h.weight"},
    {R::FfnDownBias, "gpt_neox.layers.{L}.mlp.dense_4h_to_h.bias"},
});

// HF PhiForCausalLM (phi-2 layout: separate q/k/v/dense with biases, lm_head with bias).
const TensorNames kHfPhiNames = make_tensor_names({
    {R::TokenEmbed, "model.embed_tokens.weight"},
    {R::OutputNorm, "model.final_layernorm.weight"},
    {R::OutputNormBias, "model.final_layernorm.bias"},
    {R::Output, "lm_head.weight"},
    {R::OutputBias, "lm_head.bias"},
    {R::AttnNorm, "model.layers.{L}.input_layernorm.weight"},
    {R::AttnNormBias, "model.layers.{L}.input_layernorm.bias"},
    {R::AttnQ, "model.layers.{L}.self_attn.q_proj.weight"},
    {R::AttnK, "model.layers.{L}.self_attn.k_proj.weight"},
    {R::AttnV, "model.layers.{L}.self_attn.v_proj.weight"},
    {R::AttnQBias, "model.layers.{L}.self_attn.q_proj.bias"},
    {R::AttnKBias, "model.layers.{L}.self_attn.k_proj.bias"},
    {R::AttnVBias, "model.layers.{L}.self_attn.v_proj.bias"},
    {R::AttnO, "model.layers.{L}.self_attn.dense.weight"},
    {R::AttnOBias, "model.layers.{L}.self_attn.dense.bias"},
    {R::FfnUp, "model.layers.{L}.mlp.fc1.weight"},
    {R::FfnUpBias, "model.layers.{L}.mlp.fc1.bias"},
    {R::FfnDown, "model.layers.{L}.mlp.fc2.weight"},
    {R::FfnDownBias, "model.layers.{L}.mlp.fc2.bias"},
});

// Hugging Face BertForMaskedLM (transformers modeling_bert.py). Post-LN: AttnNorm is
// attention.output.LayerNorm (after attention), FfnNorm is output.LayerNorm (after the MLP).
// Output (the MLM decoder) is tied to the word embeddings and save_pretrained does not store it;
// OutputBias is the head's own bias (cls.predictions.decoder.bias aliases it).
const TensorNames kHfBertNames = make_tensor_names({
    {R::TokenEmbed, "bert.embeddings.word_embeddings.weight"},
    {R::PosEmbed, "bert.embeddings.position_embeddings.weight"},
    {R::TypeEmbed, "bert.embeddings.token_type_embeddings.weight"},
    {R::EmbedNorm, "bert.embeddings.LayerNorm.weight"},
    {R::EmbedNormBias, "bert.embeddings.LayerNorm.bias"},
    {R::AttnQ, "bert.encoder.layer.{L}.attention.self.query.weight"},
    {R::AttnQBias, "bert.encoder.layer.{L}.attention.self.query.bias"},
    {R::AttnK, "bert.encoder.layer.{L}.attention.self.key.weight"},
    {R::AttnKBias, "bert.encoder.layer.{L}.attention.self.key.bias"},
    {R::AttnV, "bert.encoder.layer.{L}.attention.self.value.weight"},
    {R::AttnVBias, "bert.encoder.layer.{L}.attention.self.value.bias"},
    {R::AttnO, "bert.encoder.layer.{L}.attention.output.dense.weight"},
    {R::AttnOBias, "bert.encoder.layer.{L}.attention.output.dense.bias"},
    {R::AttnNorm, "bert.encoder.layer.{L}.attention.output.LayerNorm.weight"},
    {R::AttnNormBias, "bert.encoder.layer.{L}.attention.output.LayerNorm.bias"},
    {R::FfnUp, "bert.encoder.layer.{L}.intermediate.dense.weight"},
    {R::FfnUpBias, "bert.encoder.layer.{L}.intermediate.dense.bias"},
    {R::FfnDown, "bert.encoder.layer.{L}.output.dense.weight"},
    {R::FfnDownBias, "bert.encoder.layer.{L}.output.dense.bias"},
    {R::FfnNorm, "bert.encoder.layer.{L}.output.LayerNorm.weight"},
    {R::FfnNormBias, "bert.encoder.layer.{L}.output.LayerNorm.bias"},
    {R::HeadDense, "cls.predictions.transform.dense.weight"},
    {R::HeadDenseBias, "cls.predictions.transform.dense.bias"},
    {R::HeadNorm, "cls.predictions.transform.LayerNorm.weight"},
    {R::HeadNormBias, "cls.predictions.transform.LayerNorm.bias"},
    {R::Output, "cls.predictions.decoder.weight"},
    {R::OutputBias, "cls.predictions.bias"},
});

// llama.cpp's "bert" (LLM_ARCH_BERT names in src/llama-arch.cpp): an embedding model, so the
// converter keeps no MLM head (no HeadDense .. OutputBias: the family then gives no logits).
// Post-LN as in HF: attn_output_norm is attention.output.LayerNorm, layer_output_norm is
// output.LayerNorm.
const TensorNames kGgufBertNames = make_tensor_names({
    {R::TokenEmbed, "token_embd.weight"},
    {R::PosEmbed, "position_embd.weight"},
    {R::TypeEmbed, "token_types.weight"},
    {R::EmbedNorm, "token_embd_norm.weight"},
    {R::EmbedNormBias, "token_embd_norm.bias"},
    {R::AttnQ, "blk.{L}.attn_q.weight"},
    {R::AttnQBias, "blk.{L}.attn_q.bias"},
    {R::AttnK, "blk.{L}.attn_k.weight"},
    {R::AttnKBias, "blk.{L}.attn_k.bias"},
    {R::AttnV, "blk.{L}.attn_v.weight"},
    {R::AttnVBias, "blk.{L}.attn_v.bias"},
    {R::AttnO, "blk.{L}.attn_output.weight"},
    {R::AttnOBias, "blk.{L}.attn_output.bias"},
    {R::AttnNorm, "blk.{L}.attn_output_norm.weight"},
    {R::AttnNormBias, "blk.{L}.attn_output_norm.bias"},
    {R::FfnUp, "blk.{L}.ffn_up.weight"},
    {R::FfnUpBias, "blk.{L}.ffn_up.bias"},
    {R::FfnDown, "blk.{L}.ffn_down.weight"},
    {R::FfnDownBias, "blk.{L}.ffn_down.bias"},
    {R::FfnNorm, "blk.{L}.layer_output_norm.weight"},
    {R::FfnNormBias, "blk.{L}.layer_output_norm.bias"},
});

// RobertaForMaskedLM and XLMRobertaForMaskedLM: BERT's layout under "roberta." with lm_head.
const TensorNames kHfRobertaNames = make_tensor_names({
    {R::TokenEmbed, "roberta.embeddings.word_embeddings.weight"},
    {R::PosEmbed, "roberta.embeddings.position_embeddings.weight"},
    {R::TypeEmbed, "roberta.embeddings.token_type_embeddings.weight"},
    {R::EmbedNorm, "roberta.embeddings.LayerNorm.weight"},
    {R::EmbedNormBias, "roberta.embeddings.LayerNorm.bias"},
    {R::AttnQ, "roberta.encoder.layer.{L}.attention.self.query.weight"},
    {R::AttnQBias, "roberta.encoder.layer.{L}.attention.self.query.bias"},
    {R::AttnK, "roberta.encoder.layer.{L}.attention.self.key.weight"},
    {R::AttnKBias, "roberta.encoder.layer.{L}.attention.self.key.bias"},
    {R::AttnV, "roberta.encoder.layer.{L}.attention.self.value.weight"},
    {R::AttnVBias, "roberta.encoder.layer.{L}.attention.self.value.bias"},
    {R::AttnO, "roberta.encoder.layer.{L}.attention.output.dense.weight"},
    {R::AttnOBias, "roberta.encoder.layer.{L}.attention.output.dense.bias"},
    {R::AttnNorm, "roberta.encoder.layer.{L}.attention.output.LayerNorm.weight"},
    {R::AttnNormBias, "roberta.encoder.layer.{L}.attention.output.LayerNorm.bias"},
    {R::FfnUp, "roberta.encoder.layer.{L}.intermediate.dense.weight"},
    {R::FfnUpBias, "roberta.encoder.layer.{L}.intermediate.dense.bias"},
    {R::FfnDown, "roberta.encoder.layer.{L}.output.dense.weight"},
    {R::FfnDownBias, "roberta.encoder.layer.{L}.output.dense.bias"},
    {R::FfnNorm, "roberta.encoder.layer.{L}.output.LayerNorm.weight"},
    {R::FfnNormBias, "roberta.encoder.layer.{L}.output.LayerNorm.bias"},
    {R::HeadDense, "lm_head.dense.weight"},
    {R::HeadDenseBias, "lm_head.dense.bias"},
    {R::HeadNorm, "lm_head.layer_norm.weight"},
    {R::HeadNormBias, "lm_head.layer_norm.bias"},
    {R::Output, "lm_head.decoder.weight"},
    {R::OutputBias, "lm_head.bias"},
});

// HF ViTForImageClassification (modeling_vit.py module names).
const TensorNames kHfVitNames = make_tensor_names({
    {R::PatchEmbed, "vit.embeddings.patch_embeddings.projection.weight"},
    {R::PatchEmbedBias, "vit.embeddings.patch_embeddings.projection.bias"},
    {R::ClsToken, "vit.embeddings.cls_token"},
    {R::PosEmbed, "vit.embeddings.position_embeddings"},
    {R::AttnNorm, "vit.encoder.layer.{L}.layernorm_before.weight"},
    {R::AttnNormBias, "vit.encoder.layer.{L}.layernorm_before.bias"},
    {R::AttnQ, "vit.encoder.layer.{L}.attention.attention.query.weight"},
    {R::AttnK, "vit.encoder.layer.{L}.attention.attention.key.weight"},
    {R::AttnV, "vit.encoder.layer.{L}.attention.attention.value.weight"},
    {R::AttnQBias, "vit.encoder.layer.{L}.attention.attention.query.bias"},
    {R::AttnKBias, "vit.encoder.layer.{L}.attention.attention.key.bias"},
    {R::AttnVBias, "vit.encoder.layer.{L}.attention.attention.value.bias"},
    {R::AttnO, "vit.encoder.layer.{L}.attention.output.dense.weight"},
    {R::AttnOBias, "vit.encoder.layer.{L}.attention.output.dense.bias"},
    {R::FfnNorm, "vit.encoder.layer.{L}.layernorm_after.weight"},
    {R::FfnNormBias, "vit.encoder.layer.{L}.layernorm_after.bias"},
    {R::FfnUp, "vit.encoder.layer.{L}.intermediate.dense.weight"},
    {R::FfnUpBias, "vit.encoder.layer.{L}.intermediate.dense.bias"},
    {R::FfnDown, "vit.encoder.layer.{L}.output.dense.weight"},
    {R::FfnDownBias, "vit.encoder.layer.{L}.output.dense.bias"},
    {R::OutputNorm, "vit.layernorm.weight"},
    {R::OutputNormBias, "vit.layernorm.bias"},
    {R::Output, "classifier.weight"},
    {R::OutputBias, "classifier.bias"},
});

const std::vector<ArchitectureInfo>& table() {
    // One row per architecture; fields left out take ArchitectureInfo's defaults.
    static const std::vector<ArchitectureInfo> rows{
        {.name = "llama",
         .hf_model_types = {"llama"},
         .gguf_arch = "llama",
         .forward = ForwardFamily::Llama,
         .read_hf_config = read_llama_hf_config,
         .hf_keys = &kHfLlamaKeys,
         .read_gguf_config = read_llama_gguf_config,
         .hf_names = &kHfLlamaNames,
         .gguf_names = &kGgufLlamaNames,
         .llama2c_names = &kLlama2cNames,
         .gguf_qk_interleaved = true,
         .default_act = Activation::Silu},
        {.name = "mistral",
         .hf_model_types = {"mistral"},
         .forward = ForwardFamily::Llama,
         .read_hf_config = read_llama_hf_config,
         .hf_keys = &kHfLlamaKeys,
         .hf_names = &kHfLlamaNames,
         .gguf_names = &kGgufLlamaNames,
         .gguf_qk_interleaved = true,
         .default_act = Activation::Silu,
         .has_sliding_window = true,
         .sliding_window_by_default = true},
        {.name = "qwen2",
         .hf_model_types = {"qwen2"},
         .gguf_arch = "qwen2",
         .forward = ForwardFamily::Llama,
         .read_hf_config = read_llama_hf_config,
         .hf_keys = &kHfLlamaKeys,
         .read_gguf_config = read_llama_gguf_config,
         .hf_names = &kHfLlamaNames,
         .gguf_names = &kGgufLlamaNames,
         .default_act = Activation::Silu,
         .qkv_bias = true,
         .has_sliding_window = true},
        {.name = "gemma",
         .hf_model_types = {"gemma"},
         .gguf_arch = "gemma",
         .forward = ForwardFamily::Llama,
         .read_hf_config = read_llama_hf_config,
         .hf_keys = &kHfLlamaKeys,
         .read_gguf_config = read_llama_gguf_config,
         .hf_names = &kHfLlamaNames,
         .gguf_names = &kGgufLlamaNames,
         .default_act = Activation::GeluTanh,
         .norm_add_one_hf = true,
         .embed_scale = true,
         .tied_by_default = true},
        // Gemma-2 (src/model/gemma2.cpp): soft-capping, sandwich norms, local / global layers.
        {.name = "gemma2",
         .hf_model_types = {"gemma2"},
         .gguf_arch = "gemma2",
         .forward = ForwardFamily::Gemma2,
         .read_hf_config = read_gemma2_hf_config,
         .hf_keys = &kHfLlamaKeys,
         .read_gguf_config = read_gemma2_gguf_config,
         .hf_names = &kHfGemma2Names,
         .gguf_names = &kGgufGemma2Names,
         .default_act = Activation::GeluTanh,
         .norm_add_one_hf = true,
         .embed_scale = true,
         .tied_by_default = true,
         .has_sliding_window = true,
         .sliding_window_by_default = true},
        // Phi-3 (src/model/phi3.cpp): fused projections, longrope.
        {.name = "phi3",
         .hf_model_types = {"phi3"},
         .gguf_arch = "phi3",
         .forward = ForwardFamily::Phi3,
         .read_hf_config = read_phi3_hf_config,
         .hf_keys = &kHfLlamaKeys,
         .read_gguf_config = read_phi3_gguf_config,
         .hf_names = &kHfPhi3Names,
         .gguf_names = &kGgufPhi3Names,
         .default_act = Activation::Silu,
         .has_sliding_window = true,
         .sliding_window_by_default = true},
        {.name = "gpt2",
         .hf_model_types = {"gpt2"},
         .gguf_arch = "gpt2",
         .forward = ForwardFamily::Gpt2,
         .read_hf_config = read_gpt2_hf_config,
         .hf_keys = &kHfGpt2Keys,
         .read_gguf_config = read_gpt2_gguf_config,
         .hf_names = &kHfGpt2Names,
         .gguf_names = &kGgufLayerNormDecoderNames,
         .hf_conv1d = true,
         .default_act = Activation::GeluTanh,
         .qkv_bias = true,
         .tied_by_default = true},
        {.name = "gpt_neox",
         .hf_model_types = {"gpt_neox"},
         .gguf_arch = "gptneox",
         .forward = ForwardFamily::GptNeox,
         .read_hf_config = read_gpt_neox_hf_config,
         .hf_keys = &kHfGptNeoxKeys,
         .read_gguf_config = read_gpt_neox_gguf_config,
         .hf_names = &kHfGptNeoxNames,
         .gguf_names = &kGgufLayerNormDecoderNames,
         .hf_qkv_per_head = true,
         .default_act = Activation::Gelu,
         .qkv_bias = true},
        {.name = "phi",
         .hf_model_types = {"phi"},
         .gguf_arch = "phi2",
         .forward = ForwardFamily::Phi,
         .read_hf_config = read_phi_hf_config,
         .hf_keys = &kHfPhiKeys,
         .read_gguf_config = read_phi_gguf_config,
         .hf_names = &kHfPhiNames,
         .gguf_names = &kGgufLayerNormDecoderNames,
         .default_act = Activation::GeluTanh,
         .qkv_bias = true},
        // Encoders (src/model/bert.cpp); BERT also from llama.cpp's embedding-model GGUF.
        {.name = "bert",
         .hf_model_types = {"bert"},
         .gguf_arch = "bert",
         .forward = ForwardFamily::Bert,
         .read_hf_config = read_bert_hf_config,
         .hf_keys = &kHfEncoderKeys,
         .read_gguf_config = read_bert_gguf_config,
         .hf_names = &kHfBertNames,
         .gguf_names = &kGgufBertNames,
         .default_act = Activation::Gelu,
         .qkv_bias = true,
         .tied_by_default = true},
        {.name = "roberta",
         .hf_model_types = {"roberta", "xlm-roberta"},
         .forward = ForwardFamily::Roberta,
         .read_hf_config = read_roberta_hf_config,
         .hf_keys = &kHfEncoderKeys,
         .hf_names = &kHfRobertaNames,
         .default_act = Activation::Gelu,
         .qkv_bias = true,
         .tied_by_default = true},
        // Vision (src/model/vit.cpp): HF weights only.
        {.name = "vit",
         .hf_model_types = {"vit"},
         .forward = ForwardFamily::Vit,
         .read_hf_config = read_vit_hf_config,
         .hf_keys = &kHfVitKeys,
         .hf_names = &kHfVitNames,
         .default_act = Activation::Gelu,
         .qkv_bias = true},
    };
    return rows;
}

}  // namespace

const RoleInfo& role_info(TensorRole role) {
    using C = Component;
    // One row per role, in enum order (checked below).
    static const std::pair<TensorRole, RoleInfo> kRoles[] = {
        {R::TokenEmbed, {"token_embed", C::Embedding}},
        {R::OutputNorm, {"output_norm", C::Norm}},
        {R::Output, {"output", C::Output}},
        {R::AttnNorm, {"attn_norm", C::Norm}},
        {R::AttnQ, {"attn_q", C::AttentionQ, 0, false}},
        {R::AttnK, {"attn_k", C::AttentionK, 0, true}},
        {R::AttnV, {"attn_v", C::AttentionV, 0, true}},
        {R::AttnO, {"attn_o", C::AttentionO, 1, false}},
        {R::AttnQBias, {"attn_q_bias", C::AttentionQ, 0, false}},
        {R::AttnKBias, {"attn_k_bias", C::AttentionK, 0, true}},
        {R::AttnVBias, {"attn_v_bias", C::AttentionV, 0, true}},
        {R::FfnNorm, {"ffn_norm", C::Norm}},
        {R::FfnGate, {"ffn_gate", C::Mlp}},
        {R::FfnUp, {"ffn_up", C::Mlp}},
        {R::FfnDown, {"ffn_down", C::Mlp}},
        {R::PosEmbed, {"pos_embed", C::Embedding}},
        {R::TypeEmbed, {"type_embed", C::Embedding}},
        {R::EmbedNorm, {"embed_norm", C::Norm}},
        {R::EmbedNormBias, {"embed_norm_bias", C::Norm}},
        {R::OutputNormBias, {"output_norm_bias", C::Norm}},
        {R::OutputBias, {"output_bias", C::Output}},
        {R::AttnNormBias, {"attn_norm_bias", C::Norm}},
        {R::AttnOBias, {"attn_o_bias", C::AttentionO}},  // one vector for all heads
        {R::FfnNormBias, {"ffn_norm_bias", C::Norm}},
        {R::FfnUpBias, {"ffn_up_bias", C::Mlp}},
        {R::FfnDownBias, {"ffn_down_bias", C::Mlp}},
        // Fused q/k/v: families split them into AttnQ/K/V on load; the row is for completeness.
        {R::AttnQKV, {"attn_qkv", C::AttentionQ}},
        {R::AttnQKVBias, {"attn_qkv_bias", C::AttentionQ}},
        {R::HeadDense, {"head_dense", C::Output}},
        {R::HeadDenseBias, {"head_dense_bias", C::Output}},
        {R::HeadNorm, {"head_norm", C::Output}},
        {R::HeadNormBias, {"head_norm_bias", C::Output}},
        {R::PatchEmbed, {"patch_embed", C::Embedding}},
        {R::PatchEmbedBias, {"patch_embed_bias", C::Embedding}},
        {R::ClsToken, {"cls_token", C::Embedding}},
        {R::RopeFreqs, {"rope_freqs", C::Embedding}},  // read into the config, not a parameter
        {R::AttnPostNorm, {"attn_post_norm", C::Norm}},
        {R::FfnPostNorm, {"ffn_post_norm", C::Norm}},
        {R::FfnGateUp, {"ffn_gate_up", C::Mlp}},
        {R::RopeFactorsShort, {"rope_factors_short", C::Embedding}},  // config, not a parameter
        {R::RopeFactorsLong, {"rope_factors_long", C::Embedding}},    // config, not a parameter
        {R::AttnSlotK, {"attn_k_slot", C::AttentionK, 0, true}},
        {R::AttnSlotV, {"attn_v_slot", C::AttentionV, 0, true}},
    };
    static_assert(std::size(kRoles) == kNumTensorRoles, "one RoleInfo row per TensorRole");
    const auto i = static_cast<size_t>(role);
    SS_CHECK(i < std::size(kRoles) && kRoles[i].first == role, "role_info table order");
    return kRoles[i].second;
}

const char* component_name(Component c) {
    switch (c) {
        case Component::Embedding:
            return "embedding";
        case Component::AttentionQ:
            return "attention_q";
        case Component::AttentionK:
            return "attention_k";
        case Component::AttentionV:
            return "attention_v";
        case Component::AttentionO:
            return "attention_o";
        case Component::Mlp:
            return "mlp";
        case Component::Norm:
            return "norm";
        case Component::Output:
            return "output";
    }
    return "?";
}

TensorNames make_tensor_names(std::initializer_list<std::pair<TensorRole, const char*>> entries) {
    TensorNames names;
    for (const auto& [role, pattern] : entries) names.by_role[static_cast<size_t>(role)] = pattern;
    return names;
}

const std::vector<ArchitectureInfo>& architectures() {
    return table();
}

const ArchitectureInfo& find_architecture(const std::string& name) {
    for (const auto& a : table())
        if (name == a.name) return a;
    throw UnsupportedError("architecture '" + name + "' is not in the registry");
}

const ArchitectureInfo& find_by_hf_model_type(const std::string& model_type,
                                              const std::string& origin) {
    for (const auto& a : table())
        for (const auto& t : a.hf_model_types)
            if (t == model_type) return a;
    std::string known;
    for (const auto& a : table())
        for (const auto& t : a.hf_model_types) known += (known.empty() ? "" : ", ") + t;
    throw UnsupportedError(origin,
                           "model_type " + quote(model_type) + " (supported: " + known + ")");
}

const ArchitectureInfo& find_by_gguf_arch(const std::string& arch, const std::string& origin) {
    for (const auto& a : table())
        if (a.gguf_arch && arch == a.gguf_arch) return a;
    std::string known;
    for (const auto& a : table())
        if (a.gguf_arch) known += (known.empty() ? "" : ", ") + std::string(a.gguf_arch);
    throw UnsupportedError(origin,
                           "GGUF architecture " + quote(arch) + " (supported: " + known + ")");
}

const ArchitectureInfo& llama2c_architecture() {
    return table().front();
}

std::string tensor_name(const ArchitectureInfo& arch, WeightFormat format, TensorRole role,
                        int64_t layer) {
    const TensorNames* names = format == WeightFormat::HuggingFace ? arch.hf_names
                               : format == WeightFormat::Gguf      ? arch.gguf_names
                                                                   : arch.llama2c_names;
    if (!names)
        throw UnsupportedError(std::string("architecture '") + arch.name + "' has no " +
                               weight_format_name(format) + " layout");
    const char* pattern = names->by_role[static_cast<size_t>(role)];
    if (!pattern) return {};
    std::string s = pattern;
    auto at = s.find("{L}");
    if (at != std::string::npos) s.replace(at, 3, std::to_string(layer));
    return s;
}

}  // namespace sinkscope::model
