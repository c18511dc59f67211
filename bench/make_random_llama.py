#!/usr/bin/python3
"""Writes a random-weight Llama checkpoint as a Hugging Face directory (config.json +
model.safetensors, float32) and a .npy of random token ids, for the analyze memory benchmark.

usage: make_random_llama.py OUT_DIR [--tokens T] [--d-model 768] [--layers 12] [--heads 12]
                            [--d-mlp 2560] [--vocab 32000] [--seed 0] [--untied]
Default: 124M parameters (tied embeddings), about 500 MB on disk. --d-mlp 2048 --untied: the
134M model of issue 19 and bench/gguf_quant_load.py (a separate lm_head.weight).
"""
import argparse
import json
import os

import numpy as np

from checkpoint_formats import safetensors_header


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--d-mlp", type=int, default=2560)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--untied", action="store_true", help="write a separate lm_head.weight")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    D, F, V = a.d_model, a.d_mlp, a.vocab
    shapes = {"model.embed_tokens.weight": (V, D), "model.norm.weight": (D,)}
    for l in range(a.layers):
        p = f"model.layers.{l}."
        shapes[p + "input_layernorm.weight"] = (D,)
        shapes[p + "post_attention_layernorm.weight"] = (D,)
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[p + f"self_attn.{n}.weight"] = (D, D)
        shapes[p + "mlp.gate_proj.weight"] = (F, D)
        shapes[p + "mlp.up_proj.weight"] = (F, D)
        shapes[p + "mlp.down_proj.weight"] = (D, F)
    if a.untied:
        shapes["lm_head.weight"] = (V, D)
    head, offset = safetensors_header([(name, "F32", shape) for name, shape in shapes.items()])
    os.makedirs(a.out, exist_ok=True)
    n_params = 0
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(head)
        for name, shape in shapes.items():
            if name.endswith("norm.weight"):
                w = np.ones(shape, np.float32)
            else:
                w = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
            n_params += w.size
            f.write(w.tobytes())
    config = {"model_type": "llama", "hidden_size": D, "num_hidden_layers": a.layers,
              "num_attention_heads": a.heads, "num_key_value_heads": a.heads,
              "intermediate_size": F, "vocab_size": V, "max_position_embeddings": a.tokens,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": not a.untied,
              "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    ids = rng.integers(3, V, size=(1, a.tokens), dtype=np.int64)
    ids[0, 0] = 1  # BOS
    np.save(os.path.join(a.out, f"ids_{a.tokens}.npy"), ids)
    print(f"{a.out}: {n_params / 1e6:.1f}M parameters, {offset / 2**20:.0f} MiB of weights")


if __name__ == "__main__":
    main()
