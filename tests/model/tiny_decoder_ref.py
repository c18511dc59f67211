#!/usr/bin/python3
"""Independent float64 reference for the Gemma-2 and Phi-3 families (tests/model/golden_gemma2_phi3.cpp).

Usage: tiny_decoder_ref.py VARIANT OUT_DIR

Writes a tiny seeded random checkpoint as a Hugging Face directory (config.json +
model.safetensors, float32) under OUT_DIR/model, optionally its GGUF twin (OUT_DIR/model.gguf,
llama.cpp names and keys), and golden tensors in the zoo layout (tests/model/zoo_golden.hpp) under
OUT_DIR/model/golden/<input>/: input_ids, logits [T, V], attentions and attn_scores [L, H, T, T]
(masked = -inf), hidden_states [L + 1, T, D] (inputs of each layer, then the final norm output).

The forward follows the transformers modeling code (modeling_gemma2.py, modeling_phi3.py,
modeling_rope_utils.py) with plain NumPy in float64; only the RoPE inverse frequencies and cos /
sin tables are made in float32, as transformers makes them whatever the model dtype. Written from
the HF semantics, independently of the C++ code. Exit status 3: NumPy missing.
"""
import json
import math
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(3)

F32, F64 = np.float32, np.float64

# ---- variants --------------------------------------------------------------------------------

GEMMA2 = dict(
    model_type="gemma2", hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, intermediate_size=48, vocab_size=64,
    max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0,
    hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=16,
    attn_logit_softcapping=5.0, final_logit_softcapping=3.0, sliding_window=5,
    tie_word_embeddings=True, attention_bias=False, bos_token_id=2, eos_token_id=1)

VARIANTS = {
    # Even layers local (transformers' default), query_pre_attn_scalar = head_dim as Gemma-2 2B /
    # 9B, so the GGUF twin (llama.cpp scales by 1/sqrt(head_dim)) computes the same function.
    "gemma2": dict(config=GEMMA2, inputs={"long": 12}, gguf=True),
    # layer_types given (newer configs), a scalar different from head_dim.
    "gemma2_layer_types": dict(
        config=dict(GEMMA2, query_pre_attn_scalar=20, num_key_value_heads=4,
                    layer_types=["full_attention", "sliding_attention", "sliding_attention"]),
        inputs={"long": 11}, gguf=False),
    # Phi-3 with longrope: original context 8, so "long" (12 tokens) uses the long factors and
    # "short" (6 tokens) the short ones; partial rotary 0.75 (6 of 8 dims), window 10.
    "phi3": dict(
        config=dict(
            model_type="phi3", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=40, vocab_size=64,
            max_position_embeddings=32, original_max_position_embeddings=8,
            rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu",
            partial_rotary_factor=0.75, sliding_window=10, tie_word_embeddings=False,
            rope_scaling=dict(type="longrope", short_factor=[1.0, 1.3, 2.1],
                              long_factor=[1.7, 3.5, 6.0]),
            bos_token_id=1, eos_token_id=2),
        inputs={"long": 12, "short": 6}, gguf=True),
}

# ---- reference forward (float64) -------------------------------------------------------------


def rms_norm(x, w, eps, one_plus):
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y * (1.0 + w) if one_plus else y * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate((-x[..., h:], x[..., :h]), axis=-1)


def rope_tables(cfg, T, rot):
    """cos, sin [T, rot] as transformers builds them: inv_freq and tables in float32."""
    expo = np.arange(0, rot, 2, dtype=np.int64).astype(F32) / F32(rot)
    base = F32(cfg["rope_theta"])
    scaling = 1.0
    rs = cfg.get("rope_scaling")
    if rs and rs.get("type", rs.get("rope_type")) in ("longrope", "su"):
        orig = cfg["original_max_position_embeddings"]
        factor = cfg["max_position_embeddings"] / orig
        scaling = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
        # Phi-3's longrope update: long factors when max(position_ids) + 1 > original context.
        ext = np.array(rs["long_factor"] if T > orig else rs["short_factor"], dtype=F32)
        inv_freq = F32(1.0) / (ext * base ** expo)
    else:
        inv_freq = F32(1.0) / (base ** expo)
    pos = np.arange(T, dtype=F32)
    freqs = pos[:, None] * inv_freq[None, :]
    emb = np.concatenate((freqs, freqs), axis=-1)
    sc = F32(scaling)
    return (np.cos(emb) * sc).astype(F64), (np.sin(emb) * sc).astype(F64)


def apply_rope(x, cos, sin, rot):
    """x [T, heads, d_head]: rotate the first rot dims (partial rotary), pass the rest."""
    xr, xp = x[..., :rot], x[..., rot:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate((xr * c + rotate_half(xr) * s, xp), axis=-1)


def attention(q, k, v, scale, softcap, window, n_rep):
    """q [T, H, dh], k/v [T, Hkv, dh] -> out [T, H*dh], scores, probs [H, T, T], raw max."""
    T = q.shape[0]
    k = np.repeat(k, n_rep, axis=1)  # query head h reads kv head h // n_rep (repeat_kv)
    v = np.repeat(v, n_rep, axis=1)
    s = np.einsum("ihd,jhd->hij", q, k) * scale
    raw = np.abs(s).max()
    if softcap:
        s = np.tanh(s / softcap) * softcap
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    hidden = j > i
    if window:
        hidden = hidden | (i - j >= window)  # visible: i - j < window
    s = np.where(hidden, -np.inf, s)
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    out = np.einsum("hij,jhd->ihd", p, v).reshape(T, -1)
    return out, s, p, raw


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gemma2_forward(cfg, W, ids):
    L, H, Hkv, dh = (cfg["num_hidden_layers"], cfg["num_attention_heads"],
                     cfg["num_key_value_heads"], cfg["head_dim"])
    eps, T = cfg["rms_norm_eps"], len(ids)
    if "layer_types" in cfg:
        sliding = [t == "sliding_attention" for t in cfg["layer_types"]]
    else:
        sliding = [l % 2 == 0 for l in range(L)]
    cos, sin = rope_tables(cfg, T, dh)
    g = lambda n: W[n].astype(F64)
    x = g("model.embed_tokens.weight")[ids] * math.sqrt(cfg["hidden_size"])
    hs, scores, probs, raw_max = [], [], [], 0.0
    for l in range(L):
        p = f"model.layers.{l}."
        hs.append(x)
        h = rms_norm(x, g(p + "input_layernorm.weight"), eps, True)
        q = (h @ g(p + "self_attn.q_proj.weight").T).reshape(T, H, dh)
        k = (h @ g(p + "self_attn.k_proj.weight").T).reshape(T, Hkv, dh)
        v = (h @ g(p + "self_attn.v_proj.weight").T).reshape(T, Hkv, dh)
        q, k = apply_rope(q, cos, sin, dh), apply_rope(k, cos, sin, dh)
        o, s, pr, raw = attention(q, k, v, cfg["query_pre_attn_scalar"] ** -0.5,
                                  cfg["attn_logit_softcapping"],
                                  cfg["sliding_window"] if sliding[l] else 0, H // Hkv)
        raw_max = max(raw_max, raw)
        scores.append(s)
        probs.append(pr)
        a = o @ g(p + "self_attn.o_proj.weight").T
        x = x + rms_norm(a, g(p + "post_attention_layernorm.weight"), eps, True)
        h2 = rms_norm(x, g(p + "pre_feedforward_layernorm.weight"), eps, True)
        m = (gelu_tanh(h2 @ g(p + "mlp.gate_proj.weight").T) * (h2 @ g(p + "mlp.up_proj.weight").T))
        m = m @ g(p + "mlp.down_proj.weight").T
        x = x + rms_norm(m, g(p + "post_feedforward_layernorm.weight"), eps, True)
    x = rms_norm(x, g("model.norm.weight"), eps, True)
    hs.append(x)
    logits = x @ g("model.embed_tokens.weight").T
    cap = cfg["final_logit_softcapping"]
    logits = np.tanh(logits / cap) * cap
    assert raw_max > cfg["attn_logit_softcapping"], "soft-capping would not change any score"
    assert T > cfg["sliding_window"], "the window would hide nothing"
    return logits, scores, probs, hs


def phi3_forward(cfg, W, ids):
    L, H, Hkv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D, F, eps, T = cfg["hidden_size"], cfg["intermediate_size"], cfg["rms_norm_eps"], len(ids)
    dh = D // H
    rot = int(dh * cfg["partial_rotary_factor"])
    cos, sin = rope_tables(cfg, T, rot)
    g = lambda n: W[n].astype(F64)
    x = g("model.embed_tokens.weight")[ids]
    hs, scores, probs = [], [], []
    for l in range(L):
        p = f"model.layers.{l}."
        hs.append(x)
        h = rms_norm(x, g(p + "input_layernorm.weight"), eps, False)
        qkv = h @ g(p + "self_attn.qkv_proj.weight").T
        q = qkv[:, :H * dh].reshape(T, H, dh)
        k = qkv[:, H * dh:(H + Hkv) * dh].reshape(T, Hkv, dh)
        v = qkv[:, (H + Hkv) * dh:].reshape(T, Hkv, dh)
        q, k = apply_rope(q, cos, sin, rot), apply_rope(k, cos, sin, rot)
        o, s, pr, _ = attention(q, k, v, dh ** -0.5, None, cfg["sliding_window"], H // Hkv)
        scores.append(s)
        probs.append(pr)
        x = x + o @ g(p + "self_attn.o_proj.weight").T
        h2 = rms_norm(x, g(p + "post_attention_layernorm.weight"), eps, False)
        gate, up = np.split(h2 @ g(p + "mlp.gate_up_proj.weight").T, 2, axis=-1)
        silu = gate / (1.0 + np.exp(-gate))
        x = x + (up * silu) @ g(p + "mlp.down_proj.weight").T
    x = rms_norm(x, g("model.norm.weight"), eps, False)
    hs.append(x)
    logits = x @ g("lm_head.weight").T
    return logits, scores, probs, hs

# ---- weights ---------------------------------------------------------------------------------


def random_weights(cfg, gen):
    """HF-named float32 tensors; q/k drawn large so attention is far from uniform (and Gemma-2's
    raw scores exceed the soft-cap)."""
    D, V, L = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    H, Hkv, F = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    dh = cfg.get("head_dim", D // H)
    n = lambda *shape, std=0.3: (gen.standard_normal(shape) * std).astype(F32)
    gemma = cfg["model_type"] == "gemma2"
    # Gemma-2's tied embedding is also the unembedding: std 0.3 keeps most logits inside the
    # final soft-cap's unsaturated range.
    W = {"model.embed_tokens.weight": n(V, D, std=0.3 if gemma else 1.0),
         "model.norm.weight": n(D, std=0.2)}
    if not gemma:
        W["model.norm.weight"] += 1.0
        W["lm_head.weight"] = n(V, D)
    for l in range(L):
        p = f"model.layers.{l}."
        norms = (["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"] if gemma
                 else ["input_layernorm", "post_attention_layernorm"])
        for nm in norms:
            W[p + nm + ".weight"] = n(D, std=0.2) + (0.0 if gemma else 1.0)
        if gemma:
            W[p + "self_attn.q_proj.weight"] = n(H * dh, D, std=0.25)
            W[p + "self_attn.k_proj.weight"] = n(Hkv * dh, D, std=0.25)
            W[p + "self_attn.v_proj.weight"] = n(Hkv * dh, D)
            W[p + "mlp.gate_proj.weight"] = n(F, D)
            W[p + "mlp.up_proj.weight"] = n(F, D)
        else:
            qkv = np.concatenate([n(H * dh, D, std=0.3), n(Hkv * dh, D, std=0.3), n(Hkv * dh, D)])
            W[p + "self_attn.qkv_proj.weight"] = qkv
            W[p + "mlp.gate_up_proj.weight"] = n(2 * F, D)
        W[p + "self_attn.o_proj.weight"] = n(D, H * dh)
        W[p + "mlp.down_proj.weight"] = n(D, F)
    return W


def write_safetensors(path, W):
    """Format: u64 little-endian header length, JSON header {name: {dtype, shape,
    data_offsets}}, then the raw little-endian data."""
    header, blobs, off = {}, [], 0
    for name in sorted(W):
        b = np.ascontiguousarray(W[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(W[name].shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)

# ---- GGUF v3 twin ----------------------------------------------------------------------------


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, value):
    """GGUF metadata value types: 4 UINT32, 6 FLOAT32, 8 STRING."""
    out = gguf_string(key)
    if isinstance(value, str):
        return out + struct.pack("<I", 8) + gguf_string(value)
    if isinstance(value, float):
        return out + struct.pack("<If", 6, value)
    return out + struct.pack("<II", 4, value)


def write_gguf(path, kvs, tensors):
    """Header (magic GGUF, version 3, tensor count, kv count), KV pairs, tensor infos (name,
    n_dims, dims fastest-first, type 0 = F32, offset), data aligned to 32 bytes."""
    align = 32
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, v in kvs:
        out += gguf_kv(k, v)
    data, offs = b"", []
    for name, t in tensors:
        data += b"\0" * ((align - len(data) % align) % align)
        offs.append(len(data))
        data += np.ascontiguousarray(t, dtype="<f4").tobytes()
    for (name, t), off in zip(tensors, offs):
        dims = list(reversed(t.shape))
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", 0, off)
    out += b"\0" * ((align - len(out) % align) % align)
    with open(path, "wb") as f:
        f.write(out + data)


def gguf_twin(cfg, W, path):
    arch = cfg["model_type"]
    L, D = cfg["num_hidden_layers"], cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    dh = cfg.get("head_dim", D // H)
    kvs = [("general.architecture", arch),
           (arch + ".block_count", L),
           (arch + ".context_length", cfg["max_position_embeddings"]),
           (arch + ".embedding_length", D),
           (arch + ".feed_forward_length", cfg["intermediate_size"]),
           (arch + ".attention.head_count", H),
           (arch + ".attention.head_count_kv", cfg["num_key_value_heads"]),
           (arch + ".attention.key_length", dh),
           (arch + ".attention.value_length", dh),
           (arch + ".rope.freq_base", float(cfg["rope_theta"])),
           (arch + ".attention.layer_norm_rms_epsilon", float(cfg["rms_norm_eps"])),
           (arch + ".attention.sliding_window", cfg["sliding_window"])]
    T = []
    if arch == "gemma2":
        # convert_hf_to_gguf.py Gemma2Model: norms stored as 1 + w, Q/K rows not permuted.
        kvs += [(arch + ".attn_logit_softcapping", float(cfg["attn_logit_softcapping"])),
                (arch + ".final_logit_softcapping", float(cfg["final_logit_softcapping"]))]
        names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
                 "pre_feedforward_layernorm": "ffn_norm",
                 "post_feedforward_layernorm": "post_ffw_norm", "self_attn.q_proj": "attn_q",
                 "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate",
                 "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
        T.append(("token_embd.weight", W["model.embed_tokens.weight"]))
        T.append(("output_norm.weight", W["model.norm.weight"] + 1.0))
        for l in range(L):
            for hf, gg in names.items():
                t = W[f"model.layers.{l}.{hf}.weight"]
                T.append((f"blk.{l}.{gg}.weight", t + 1.0 if "norm" in hf else t))
    else:
        # Phi3MiniModel: fused attn_qkv and ffn_up ([gate; up]), rope_factors_* tensors.
        rot = int(dh * cfg["partial_rotary_factor"])
        orig = cfg["original_max_position_embeddings"]
        factor = cfg["max_position_embeddings"] / orig
        kvs += [(arch + ".rope.dimension_count", rot),
                (arch + ".rope.scaling.original_context_length", orig),
                (arch + ".rope.scaling.attn_factor",
                 float(math.sqrt(1 + math.log(factor) / math.log(orig))))]
        rs = cfg["rope_scaling"]
        T.append(("token_embd.weight", W["model.embed_tokens.weight"]))
        T.append(("output_norm.weight", W["model.norm.weight"]))
        T.append(("output.weight", W["lm_head.weight"]))
        T.append(("rope_factors_long.weight", np.array(rs["long_factor"], dtype=F32)))
        T.append(("rope_factors_short.weight", np.array(rs["short_factor"], dtype=F32)))
        names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
                 "self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output",
                 "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
        for l in range(L):
            for hf, gg in names.items():
                T.append((f"blk.{l}.{gg}.weight", W[f"model.layers.{l}.{hf}.weight"]))
    write_gguf(path, kvs, T)

# ---- main ------------------------------------------------------------------------------------


def main():
    variant, out = sys.argv[1], sys.argv[2]
    spec = VARIANTS[variant]
    cfg = spec["config"]
    gen = np.random.default_rng(1234)
    W = random_weights(cfg, gen)
    model_dir = os.path.join(out, "model")
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(model_dir, "model.safetensors"), W)
    if spec["gguf"]:
        gguf_twin(cfg, W, os.path.join(out, "model.gguf"))
    forward = gemma2_forward if cfg["model_type"] == "gemma2" else phi3_forward
    for name, T in spec["inputs"].items():
        ids = gen.integers(3, cfg["vocab_size"], size=T)
        logits, scores, probs, hs = forward(cfg, W, ids)
        d = os.path.join(model_dir, "golden", name)
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input_ids.npy"), ids.astype(np.int64))
        np.save(os.path.join(d, "logits.npy"), logits)
        np.save(os.path.join(d, "attn_scores.npy"), np.stack(scores))
        np.save(os.path.join(d, "attentions.npy"), np.stack(probs))
        np.save(os.path.join(d, "hidden_states.npy"), np.stack(hs))


if __name__ == "__main__":
    main()
