#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/), from scratch: every
file is built here from the format definitions (npy, safetensors, GGUF, tokenizer.json,
SentencePiece protobuf, llama2.c, PyTorch zip + pickle, PNG, data files). Deterministic; run it
with Debian's /usr/bin/python3 (numpy) after changing a format, and commit the result.

    /usr/bin/python3 tests/fuzz/make_seeds.py [OUT_DIR]   (default tests/fuzz/corpus)

The report and state seeds come from the built tool: scripts/fuzz.sh --refresh-seeds adds
them (a `sinkscope metrics --example` run folder, an interrupted run's state file).
"""
import io
import json
import os
import pickle
import struct
import sys
import types
import zipfile
import zlib

import numpy as np

args = sys.argv[1:]
RUN = None
if "--run" in args:
    k = args.index("--run")
    RUN = args[k + 1]
    del args[k:k + 2]
OUT = args[0] if args else os.path.join(os.path.dirname(__file__), "corpus")
rng = np.random.default_rng(7)


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- npy / npz --------------------------------------------------------------------------------
def npy(a, fortran=False):
    b = io.BytesIO()
    np.save(b, np.asfortranarray(a) if fortran else a)
    return b.getvalue()


put("npy", "f32_3d.npy", npy(rng.random((2, 3, 4), dtype=np.float32)))
put("npy", "f64_2d.npy", npy(rng.random((3, 3))))
put("npy", "f16_fortran.npy", npy(rng.random((2, 5)).astype(np.float16), fortran=True))
put("npy", "i64_ids.npy", npy(np.arange(6, dtype=np.int64).reshape(2, 3)))
put("npy", "images_4d.npy", npy(rng.random((1, 3, 4, 4), dtype=np.float32)))
put("npy", "bool.npy", npy(np.array([True, False])))
b = io.BytesIO()
np.savez(b, attention=rng.random((1, 2, 3, 3), dtype=np.float32), ids=np.arange(3))
put("npy", "archive.npz", b.getvalue())


# ---- safetensors ------------------------------------------------------------------------------
def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


f32 = lambda n: rng.random(n, dtype=np.float32).tobytes()
put("safetensors", "model.safetensors", safetensors({
    "model.embed_tokens.weight": ("F32", [4, 2], f32(8)),
    "model.norm.weight": ("F16", [2], np.ones(2, np.float16).tobytes()),
    "lm_head.weight": ("BF16", [4, 2], (np.ones(8, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()),
    "position_ids": ("I64", [1, 3], np.arange(3, dtype=np.int64).tobytes()),
}, {"format": "pt"}))
put("safetensors", "index.json", json.dumps({"metadata": {"total_size": 16},
    "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}))
put("safetensors", "index_escape.json", json.dumps({"weight_map": {"x": "a.safetensors", "z": "../outside/c.safetensors"}}))


# ---- GGUF -------------------------------------------------------------------------------------
GT = dict(u8=0, i8=1, u16=2, i16=3, u32=4, i32=5, f32=6, bool=7, str=8, arr=9, u64=10, i64=11, f64=12)
FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gstr(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(s)) + s


def gval(t, v):
    if t == GT["str"]:
        return gstr(v)
    if t == GT["arr"]:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, x) for x in items)
    return struct.pack(FMT[t], v)


# ggml types: name -> (id, block elements, block bytes)
QT = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
      "Q8_0": (8, 32, 34), "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
      "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "Q8_K": (15, 256, 292), "IQ4_NL": (20, 32, 18)}


def gguf(kv, tensors, version=3):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for k, (t, v) in kv.items():
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    data, infos = b"", b""
    for name, (qt, dims) in tensors.items():
        tid, be, bb = QT[qt]
        n = int(np.prod(dims))
        raw = bytearray(rng.integers(0, 256, n // be * bb, dtype=np.uint8).tobytes())
        if qt == "F32":
            raw = bytearray(rng.random(n, dtype=np.float32).tobytes())
        elif qt == "F16":
            raw = bytearray(rng.random(n).astype(np.float16).tobytes())
        data += b"\0" * (-len(data) % 32)
        infos += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", tid, len(data))
        data += bytes(raw)
    out += infos
    out += b"\0" * (-len(out) % 32)
    return out + data


llama_kv = {
    "general.architecture": (GT["str"], "llama"), "general.name": (GT["str"], "seed"),
    "llama.block_count": (GT["u32"], 1), "llama.context_length": (GT["u32"], 16),
    "llama.embedding_length": (GT["u32"], 8), "llama.feed_forward_length": (GT["u32"], 16),
    "llama.attention.head_count": (GT["u32"], 2), "llama.attention.head_count_kv": (GT["u32"], 2),
    "llama.rope.dimension_count": (GT["u32"], 4), "llama.rope.freq_base": (GT["f32"], 10000.0),
    "llama.attention.layer_norm_rms_epsilon": (GT["f32"], 1e-5),
    "tokenizer.ggml.model": (GT["str"], "llama"),
    "tokenizer.ggml.tokens": (GT["arr"], (GT["str"], ["<unk>", "<s>", "</s>", "\u2581", "\u2581a", "b", "c", "<0x41>"])),
    "tokenizer.ggml.scores": (GT["arr"], (GT["f32"], [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, 0.0])),
    "tokenizer.ggml.token_type": (GT["arr"], (GT["i32"], [2, 3, 3, 1, 1, 1, 1, 6])),
    "tokenizer.ggml.bos_token_id": (GT["u32"], 1), "tokenizer.ggml.eos_token_id": (GT["u32"], 2),
    "tokenizer.ggml.unknown_token_id": (GT["u32"], 0), "tokenizer.ggml.add_bos_token": (GT["bool"], True),
}
llama_t = {"token_embd.weight": ("F32", [8, 8]), "blk.0.attn_q.weight": ("Q8_0", [32, 1]),
           "blk.0.attn_k.weight": ("Q4_0", [32, 1]), "blk.0.attn_v.weight": ("F16", [8, 2]),
           "blk.0.ffn_up.weight": ("Q4_K", [256, 1]), "blk.0.ffn_down.weight": ("Q6_K", [256, 1])}
put("gguf", "llama_spm.gguf", gguf(llama_kv, llama_t))
put("gguf", "quant_k.gguf", gguf({"general.architecture": (GT["str"], "llama"),
    "general.alignment": (GT["u32"], 64)}, {k: (k, [v[1] if v[1] > 1 else 32]) for k, v in QT.items()}))
gpt2_kv = {"general.architecture": (GT["str"], "gpt2"), "gpt2.block_count": (GT["u32"], 1),
           "gpt2.context_length": (GT["u32"], 16), "gpt2.embedding_length": (GT["u32"], 8),
           "gpt2.feed_forward_length": (GT["u32"], 32), "gpt2.attention.head_count": (GT["u32"], 2),
           "gpt2.attention.layer_norm_epsilon": (GT["f32"], 1e-5),
           "tokenizer.ggml.model": (GT["str"], "gpt2"),
           "tokenizer.ggml.tokens": (GT["arr"], (GT["str"], ["a", "b", "\u0120", "ab", "\u0120a", "<|endoftext|>"])),
           "tokenizer.ggml.merges": (GT["arr"], (GT["str"], ["a b", "\u0120 a"])),
           "tokenizer.ggml.token_type": (GT["arr"], (GT["i32"], [1, 1, 1, 1, 1, 3])),
           "tokenizer.ggml.bos_token_id": (GT["u32"], 5), "tokenizer.ggml.eos_token_id": (GT["u32"], 5),
           "tokenizer.ggml.pre": (GT["str"], "gpt-2")}
put("gguf", "gpt2_bpe.gguf", gguf(gpt2_kv, {"token_embd.weight": ("F32", [8, 6])}))
bert_kv = {"general.architecture": (GT["str"], "bert"), "bert.block_count": (GT["u32"], 1),
           "bert.context_length": (GT["u32"], 16), "bert.embedding_length": (GT["u32"], 8),
           "bert.feed_forward_length": (GT["u32"], 16), "bert.attention.head_count": (GT["u32"], 2),
           "bert.attention.layer_norm_epsilon": (GT["f32"], 1e-12), "bert.attention.causal": (GT["bool"], False),
           "tokenizer.ggml.model": (GT["str"], "bert"),
           "tokenizer.ggml.tokens": (GT["arr"], (GT["str"], ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##s", ","])),
           "tokenizer.ggml.token_type": (GT["arr"], (GT["i32"], [3, 2, 3, 3, 3, 1, 1, 1])),
           "tokenizer.ggml.cls_token_id": (GT["u32"], 2), "tokenizer.ggml.seperator_token_id": (GT["u32"], 3),
           "tokenizer.ggml.unknown_token_id": (GT["u32"], 1), "tokenizer.ggml.padding_token_id": (GT["u32"], 0)}
put("gguf", "bert_wpm.gguf", gguf(bert_kv, {"token_embd.weight": ("F16", [8, 8])}))
put("config", "llama.gguf", gguf(llama_kv, {"token_embd.weight": ("F32", [8, 8])}))
put("config", "gpt2.gguf", gguf(gpt2_kv, {}))
put("config", "bert.gguf", gguf(bert_kv, {}))

# ---- config.json ------------------------------------------------------------------------------
base = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "vocab_size": 16, "max_position_embeddings": 32, "torch_dtype": "float32"}
configs = {
    "llama": dict(base, model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="silu",
                  num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
    "llama_yarn": dict(base, model_type="llama", hidden_act="silu", rms_norm_eps=1e-6,
                       rope_scaling={"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 16}),
    "qwen2": dict(base, model_type="qwen2", hidden_act="silu", rms_norm_eps=1e-6, num_key_value_heads=2,
                  sliding_window=8, use_sliding_window=False),
    "gemma": dict(base, model_type="gemma", hidden_act="gelu_pytorch_tanh", head_dim=4, rms_norm_eps=1e-6),
    "gemma2": dict(base, model_type="gemma2", hidden_activation="gelu_pytorch_tanh", head_dim=4,
                   rms_norm_eps=1e-6, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                   query_pre_attn_scalar=4, sliding_window=8),
    "phi3": dict(base, model_type="phi3", hidden_act="silu", rms_norm_eps=1e-5, original_max_position_embeddings=16,
                 rope_scaling={"type": "longrope", "short_factor": [1.0, 1.0], "long_factor": [2.0, 2.0]}),
    "gpt2": {"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1, "n_positions": 32, "vocab_size": 16,
             "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5},
    "gpt_neox": dict(base, model_type="gpt_neox", hidden_act="gelu", rotary_pct=0.25, use_parallel_residual=True,
                     layer_norm_eps=1e-5),
    "phi": dict(base, model_type="phi", hidden_act="gelu_new", partial_rotary_factor=0.5, layer_norm_eps=1e-5),
    "bert": dict(base, model_type="bert", hidden_act="gelu", layer_norm_eps=1e-12, type_vocab_size=2),
    "xlm-roberta": dict(base, model_type="xlm-roberta", hidden_act="gelu", layer_norm_eps=1e-5,
                        pad_token_id=1, type_vocab_size=1),
    "vit": {"model_type": "vit", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
            "num_attention_heads": 2, "image_size": 8, "patch_size": 4, "num_channels": 3, "hidden_act": "gelu",
            "layer_norm_eps": 1e-12, "num_labels": 2},
}
for name, c in configs.items():
    put("config", name + ".json", json.dumps(c, indent=1))

# ---- tokenizer.json ---------------------------------------------------------------------------
bl = lambda s: "".join(chr(0x100 + ord(ch)) if ch == " " else ch for ch in s)  # ' ' -> 'Ġ'
toks = {
    "bpe_bytelevel": {"version": "1.0", "added_tokens": [{"id": 6, "content": "<|endoftext|>", "special": True,
        "single_word": False, "lstrip": False, "rstrip": False, "normalized": False}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": {"H": 0, "e": 1, "l": 2, "o": 3, bl(" "): 4, "He": 5, "ll": 7, bl(" w"): 8},
                  "merges": ["H e", "l l", bl(" ") + " w"]}},
    "bpe_spm_llama": {"version": "1.0", "added_tokens": [{"id": 1, "content": "<s>", "special": True},
                                                         {"id": 2, "content": "</s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                      {"type": "ByteFallback"}, {"type": "Fuse"},
                                                      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                  "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x41>": 3, "\u2581": 4, "a": 5, "b": 6, "\u2581a": 7},
                  "merges": [["\u2581", "a"]]}},
    "wordpiece_bert": {"version": "1.0", "added_tokens": [{"id": 0, "content": "[PAD]", "special": True},
        {"id": 1, "content": "[UNK]", "special": True}, {"id": 2, "content": "[CLS]", "special": True},
        {"id": 3, "content": "[SEP]", "special": True}, {"id": 4, "content": "[MASK]", "special": True}],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                           "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                              "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100,
                  "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "hello": 5, ",": 6, "world": 7, "##s": 8}}},
    "unigram_metaspace": {"version": "1.0", "added_tokens": [{"id": 0, "content": "<pad>", "special": True},
        {"id": 2, "content": "</s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
                                                           {"type": "NFKC"}, {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "</s>", "type_id": 0}}], "pair": [], "special_tokens":
                           {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": 1, "byte_fallback": False,
                  "vocab": [["<pad>", 0.0], ["<unk>", 0.0], ["</s>", 0.0], ["\u2581", -2.0], ["\u2581hello", -3.0],
                            ["h", -5.0], ["e", -5.0], ["l", -5.0], ["o", -5.0], ["\u2581w", -4.0]]}},
    "wordlevel_split": {"version": "1.0", "added_tokens": [],
        "normalizer": {"type": "Strip", "strip_left": True, "strip_right": True},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
            {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Isolated", "invert": False},
            {"type": "Punctuation", "behavior": "Isolated"}, {"type": "Digits", "individual_digits": True}]},
        "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "hello": 1, "world": 2, "1": 3, ",": 4}}},
}
for name, t in toks.items():
    put("tokenizer_json", name + ".json", json.dumps(t, indent=1))
put("tokenizer_json", "bpe_text.json", json.dumps(toks["bpe_bytelevel"]) + "\n#TEXT\nHello  world\t\u00e9\u4e2d <|endoftext|>")


# ---- SentencePiece .model ---------------------------------------------------------------------
def varint(n):
    out = b""
    while True:
        b7 = n & 0x7F
        n >>= 7
        out += bytes([b7 | (0x80 if n else 0)])
        if not n:
            return out


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 5:
        return key + payload
    return key + varint(len(payload)) + payload


def spm(pieces, model_type, byte_fallback=False, norm=None):
    out = b""
    for text, score, typ in pieces:
        p = field(1, 2, text.encode()) + field(2, 5, struct.pack("<f", score)) + field(3, 0, typ)
        out += field(1, 2, p)
    trainer = field(3, 0, model_type) + field(4, 0, len(pieces)) + field(35, 0, int(byte_fallback))
    trainer += field(40, 0, 0) + field(41, 0, 1) + field(42, 0, 2) + field(43, 0, 2**64 - 1)
    trainer += field(46, 2, b"<s>") + field(47, 2, b"</s>")
    out += field(2, 2, trainer)
    n = norm or {}
    ns = field(1, 2, n.get("name", b"identity")) + field(3, 0, n.get("dummy", 1)) + field(4, 0, n.get("extra", 1)) + field(5, 0, 1)
    out += field(3, 2, ns)
    return out


base_pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("\u2581", -1.0, 1), ("\u2581he", -2.0, 1),
               ("llo", -2.5, 1), ("h", -4.0, 1), ("e", -4.0, 1), ("l", -4.0, 1), ("o", -4.0, 1), ("<user>", 0.0, 4)]
put("sentencepiece", "unigram.model", spm(base_pieces, 1))
put("sentencepiece", "bpe_bytes.model", spm(base_pieces + [("<0x%02X>" % i, 0.0, 6) for i in range(256)], 2, True))
put("sentencepiece", "unigram_nodummy.model", spm(base_pieces, 1, norm={"name": b"nmt_nfkc", "dummy": 0, "extra": 0}))


# ---- llama2.c ---------------------------------------------------------------------------------
def llama2c(dim=8, hidden=16, layers=1, heads=2, kv=2, vocab=8, seq=4, shared=True):
    hs = dim // heads
    n = vocab * dim + layers * dim + layers * dim * dim + 2 * layers * dim * (kv * hs) + layers * dim * dim
    n += layers * dim + 3 * layers * dim * hidden + dim + seq * hs
    if not shared:
        n += vocab * dim
    hdr = struct.pack("<7i", dim, hidden, layers, heads, kv, vocab if shared else -vocab, seq)
    return hdr + rng.random(n, dtype=np.float32).tobytes()


put("llama2c", "model_shared.bin", b"\x00" + llama2c())
put("llama2c", "model_gqa_unshared.bin", b"\x02" + llama2c(kv=1, shared=False, layers=2))
tok = struct.pack("<i", 8)
for i, t in enumerate([b"<unk>", b"\n<s>\n", b"\n</s>\n", b" ", b"a", b"<0x41>", b"Once", b" upon"]):
    tok += struct.pack("<fi", -float(i), len(t)) + t
put("llama2c", "tokenizer.bin", b"\x01" + struct.pack("<H", 7) + tok)


# ---- PyTorch pickle and zip -------------------------------------------------------------------
def torch_pickle(tensors):
    """Protocol-2 pickle of an OrderedDict of tensors, as torch.save writes it, with stand-in
    torch modules (no torch needed); returns (pickle bytes, {key: storage bytes})."""
    torch_mod = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    storage_cls = {}
    for st in ("FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "DoubleStorage"):
        cls = type(st, (), {"__module__": "torch", "__qualname__": st})
        setattr(torch_mod, st, cls)
        storage_cls[st] = cls

    def _rebuild_tensor_v2(*a):
        return None

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch_mod._utils = utils
    saved = {k: sys.modules.get(k) for k in ("torch", "torch._utils")}
    sys.modules["torch"], sys.modules["torch._utils"] = torch_mod, utils

    class Storage:
        def __init__(self, key, st, numel):
            self.key, self.st, self.numel = key, st, numel

    class T:
        def __init__(self, storage, shape):
            self.storage, self.shape = storage, shape

        def __reduce__(self):
            stride, s = [], 1
            for d in reversed(self.shape):
                stride.insert(0, s)
                s *= d
            import collections
            return (_rebuild_tensor_v2, (self.storage, 0, tuple(self.shape), tuple(stride), False, collections.OrderedDict()))

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Storage):
                return ("storage", storage_cls[obj.st], obj.key, "cpu", obj.numel)
            return None

    import collections
    d = collections.OrderedDict()
    blobs = {}
    for i, (name, (st, shape, raw)) in enumerate(tensors.items()):
        d[name] = T(Storage(str(i), st, int(np.prod(shape))), shape)
        blobs[str(i)] = raw
    b = io.BytesIO()
    P(b, protocol=2).dump(d)
    for k, v in saved.items():
        if v is None:
            sys.modules.pop(k, None)
        else:
            sys.modules[k] = v
    return b.getvalue(), blobs


tensors = {"embed.weight": ("FloatStorage", [4, 2], f32(8)),
           "norm.weight": ("HalfStorage", [2], np.ones(2, np.float16).tobytes()),
           "ids": ("LongStorage", [3], np.arange(3, dtype=np.int64).tobytes())}
pkl, blobs = torch_pickle(tensors)
put("pickle", "data.pkl", pkl)
z = io.BytesIO()
with zipfile.ZipFile(z, "w", zipfile.ZIP_STORED) as zf:
    zf.writestr("archive/data.pkl", pkl)
    zf.writestr("archive/byteorder", "little")
    for k, v in blobs.items():
        zf.writestr("archive/data/" + k, v)
    zf.writestr("archive/version", "3\n")
put("pickle", "pytorch_model.bin", z.getvalue())


# ---- PNG --------------------------------------------------------------------------------------
def png(w, h, color_type, bit_depth, rows, plte=None, interlace=0):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, interlace))
    if plte:
        out += chunk(b"PLTE", plte)
    raw = b"".join(b"\x00" + r for r in rows)
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


put("png", "rgb_3x2.png", png(3, 2, 2, 8, [bytes(range(9)), bytes(range(9, 18))]))
put("png", "gray_4x4.png", png(4, 4, 0, 8, [bytes([i * 16 + j for j in range(4)]) for i in range(4)]))
put("png", "rgba_2x2.png", png(2, 2, 6, 8, [bytes(8), bytes(range(8))]))
put("png", "gray16_2x2.png", png(2, 2, 0, 16, [bytes(4), bytes([1, 2, 3, 4])]))
put("png", "palette_2x2.png", png(2, 2, 3, 8, [b"\x00\x01", b"\x01\x00"], plte=b"\xff\x00\x00\x00\xff\x00"))
put("png", "preprocessor_config.json", json.dumps({"do_resize": True, "size": {"height": 8, "width": 8},
    "resample": 2, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "image_processor_type": "ViTImageProcessor"}))

# ---- data files -------------------------------------------------------------------------------
put("data", "prompts.txt", b"\x00" + "Once upon a time.\n\nThe cat sat.\r\nCaf\u00e9 \u4e2d\u6587\n".encode())
put("data", "prompts.jsonl", b"\x01" + b'{"text": "one"}\n{"text": "two \\u00e9", "id": 3}\n\n{"ids": [1, 2, 3]}\n')
put("data", "prompts.csv", b"\x02" + b'id,text,prompt\n1,"a, quoted ""one""",x\n2,plain,y\n3,"multi\nline",z\n')
put("data", "ids.npy", b"\x03" + npy(np.array([[1, 5, 7], [1, 2, 3]], dtype=np.int64)))
# ---- checkpoint manifests (byte 0 even: JSON, odd: CSV; "." exists beside the file) -----------
put("manifest", "train_json", b"\x00" + json.dumps({"checkpoints": [{"step": 500, "path": ".", "loss": 1.2},
                                                          {"step": 1000, "path": "."}]}).encode())
put("manifest", "list_json", b"\x00" + json.dumps([{"label": "a", "path": "."},
                                                    {"label": "b", "step": 3, "path": "."}]).encode())
put("manifest", "labels_csv", b"\x01label,step,path\nrev1,1000,.\nrev2,2000,.\n")
put("manifest", "train_csv", b"\x01step,tokens,loss,sink_eps,eps,path\n500,512000,1.1,0,0.3,.\n")
# ---- report run folders ----------------------------------------------------------------------
def pack(files):
    return "".join("=== %s\n%s\n" % (name, body) for name, body in files)


put("report", "minimal.txt", pack([
    ("run.json", json.dumps({"model": {"path": "m"}, "p2": {"mode": "spec"}, "options": {"sink": "bos"}})),
    ("heads.csv", "model,checkpoint,layer,head,metric,param,value\nm,,0,0,sink_mass,,0.5\nm,,1,1,sink_mass,,nan\n"),
    ("frame.json", json.dumps({"layers": [{"layer": 0, "type": "sink"}]}))]))
if RUN:
    files = []
    for name in sorted(os.listdir(RUN)):
        if name.endswith(".csv") or name.endswith(".json"):
            with open(os.path.join(RUN, name), encoding="utf-8") as f:
                lines = f.read().splitlines()[:25]
            files.append((name, "\n".join(lines)))
    put("report", os.path.basename(os.path.normpath(RUN)) + ".txt", pack(files))
print("seeds written to", OUT)
