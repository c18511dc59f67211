"""Checkpoint file formats shared by the bench scripts (numpy only, no other dependency).

* GGUF v3 (ggml's gguf.md): header "GGUF", u32 version 3, u64 tensor count, u64 metadata count;
  metadata (key string, u32 value type, value); tensor infos (name, u32 n_dims, u64 ne[n_dims]
  with ne[0] the fastest-varying dimension, u32 ggml type, u64 offset into the data section);
  padding to general.alignment (32); the data section, each tensor padded to the alignment.
  Strings are u64 length + UTF-8 bytes. GgufWriter streams: the header and the info table go
  first (every tensor's size follows from its ne and type), then each tensor's data in table
  order, handed over in chunks, so no tensor has to be held whole.
* ggml block encodings: Q8_0 (34 bytes per 32 values: f16 scale d, 32 int8 q; x = d * q) and
  Q4_K (144 bytes per 256 values, ggml block_q4_K), both vectorised.
* bfloat16: the high 16 bits of float32 rounded to nearest, ties to even (NaN stays a quiet NaN).
* safetensors: u64 little-endian header length, a JSON header {name: {dtype, shape,
  data_offsets [begin, end) relative to the data}, "__metadata__": {...}} padded with spaces to a
  multiple of 8 bytes, then the data.

Used by make_checkpoint.py, gguf_quant_load.py and make_random_llama.py.
"""
import json
import struct

import numpy as np

GGUF_ALIGN = 32
# ggml types (ggml.h enum ggml_type) this module writes.
T_F32, T_F16, T_Q8_0, T_Q4_K = 0, 1, 8, 12
GGML_TYPE_NAMES = {T_F32: "F32", T_F16: "F16", T_Q8_0: "Q8_0", T_Q4_K: "Q4_K"}
# ggml type -> (values per block, bytes per block).
GGML_BLOCKS = {T_F32: (1, 4), T_F16: (1, 2), T_Q8_0: (32, 34), T_Q4_K: (256, 144)}
# GGUF metadata value types (gguf.md enum gguf_metadata_value_type) by the kinds used here.
GGUF_VALUE_TYPES = {"u32": (4, "<I"), "i32": (5, "<i"), "f32": (6, "<f"), "bool": (7, "<?"),
                    "u64": (10, "<Q")}
GGUF_STRING = 8
SAFETENSORS_DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}


# ---- value encodings ----

def f16_ceil(x):
    """Smallest float16 >= x elementwise (x >= 0 float32 array), as float16."""
    h = x.astype(np.float16)
    low = h.astype(np.float32) < x
    bits = h.view(np.uint16).copy()
    bits[low] += 1
    return bits.view(np.float16)


def bf16_bits(x):
    """float32 array -> bfloat16 bit patterns (uint16): round to nearest, ties to even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    # Adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the dropped
    # half is above one half, or is one half and the kept value is odd. Finite values cannot
    # overflow u32 (the largest, -inf = 0xFF800000, gains at most 0x8000).
    r = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    if nan.any():  # keep sign and the top payload bits, force the quiet bit
        r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def quantize_q8_0(w):
    """float32 array (size % 32 == 0, row-major, rows of a multiple of 32) -> Q8_0 bytes.

    ggml block_q8_0: f16 d, int8 q[32]; value = d * q. d = max|x| / 127 rounded up to a float16
    (so |x| / d <= 127 and no q needs clipping), q = round(x / d) computed in float64: every
    dequantized value is within d / 2 of x.
    """
    x = np.asarray(w, dtype=np.float32).reshape(-1, 32)
    d = f16_ceil((np.abs(x).max(axis=1) / 127).astype(np.float32))
    d64 = d.astype(np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d64 > 0, np.rint(x / d64), 0)
    q = np.clip(q, -127, 127).astype(np.int8)
    n = x.shape[0]
    out = np.empty((n, 34), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(n, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_k(w):
    """[rows, cols] float32 (cols % 256 == 0) -> Q4_K bytes (ggml block_q4_K, 144 per 256).

    A valid Q4_K encoder (scales rounded up, quants rounded to nearest, as
    tests/testing/ggml_quantize.hpp), not llama.cpp's search.
    """
    x = w.reshape(-1, 8, 32).astype(np.float32)  # super-blocks x sub-blocks x values
    lo = np.minimum(x.min(axis=2), 0)  # x = (d * sc) * q - dmin * m, m >= 0
    hi = x.max(axis=2)
    dmin = f16_ceil(((-lo).max(axis=1) / 63).astype(np.float32))
    dmin32 = dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(dmin32 > 0, np.minimum(np.ceil(-lo / dmin32), 63), 0).astype(np.uint8)
        s = (hi + dmin32 * m) / 15
        d = f16_ceil((s.max(axis=1) / 63).astype(np.float32))
        d32 = d.astype(np.float32)[:, None]
        sc = np.where(d32 > 0, np.minimum(np.ceil(s / d32), 63), 0).astype(np.uint8)
        step = (d32 * sc)[:, :, None]
        q = np.where(step > 0, np.rint((x + (dmin32 * m)[:, :, None]) / step), 0)
    q = np.clip(q, 0, 15).astype(np.uint8)
    n = x.shape[0]
    out = np.zeros((n, 144), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(n, 2)
    out[:, 2:4] = dmin.view(np.uint8).reshape(n, 2)
    # scales[12]: j < 4: sc_j | (sc_{j+4} >> 4) << 6, m_j | (m_{j+4} >> 4) << 6;
    # bytes 8-11: sc_{j+4} & 15 | (m_{j+4} & 15) << 4 (ggml get_scale_min_k4 inverted)
    out[:, 4:8] = sc[:, :4] | (sc[:, 4:] >> 4) << 6
    out[:, 8:12] = m[:, :4] | (m[:, 4:] >> 4) << 6
    out[:, 12:16] = (sc[:, 4:] & 15) | (m[:, 4:] & 15) << 4
    # qs[128]: value 64g + 32t + l is nibble t of qs[32g + l]
    qg = q.reshape(n, 4, 2, 32)
    out[:, 16:] = (qg[:, :, 0, :] | qg[:, :, 1, :] << 4).reshape(n, 128)
    return out.tobytes()


def encode_ggml(w, ggml_type):
    """float32 [rows, cols] (rows whole, cols a multiple of the type's block) -> ggml bytes."""
    if ggml_type == T_F32:
        return np.ascontiguousarray(w, dtype=np.float32).tobytes()
    if ggml_type == T_F16:
        return np.asarray(w, dtype=np.float32).astype(np.float16).tobytes()
    if ggml_type == T_Q8_0:
        return quantize_q8_0(w)
    if ggml_type == T_Q4_K:
        return quantize_q4_k(w)
    raise ValueError(f"ggml type {ggml_type} has no encoder here")


def ggml_nbytes(ne, ggml_type):
    """Bytes of a tensor of ggml dims ne (ne[0] fastest) in ggml_type."""
    per_block, block_bytes = GGML_BLOCKS[ggml_type]
    if ne[0] % per_block:
        raise ValueError(f"row length {ne[0]} is not a multiple of {per_block} "
                         f"({GGML_TYPE_NAMES[ggml_type]})")
    return int(np.prod(ne, dtype=np.int64)) // per_block * block_bytes


# ---- GGUF ----

def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _padded(n, align=GGUF_ALIGN):
    return (n + align - 1) // align * align


def gguf_header(kv, infos):
    """kv: [(key, kind, value)] with kind u32|i32|u64|f32|bool|str; infos: [(name, ne, type)].

    The bytes before the data section: header, metadata, tensor infos (offsets assigned in order,
    each tensor starting at a multiple of GGUF_ALIGN) and the padding to GGUF_ALIGN.
    """
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kv))
    for key, kind, value in kv:
        head += gguf_string(key)
        if kind == "str":
            head += struct.pack("<I", GGUF_STRING) + gguf_string(value)
        else:
            code, fmt = GGUF_VALUE_TYPES[kind]
            head += struct.pack("<I", code) + struct.pack(fmt, value)
    offset = 0
    for name, ne, ty in infos:
        head += gguf_string(name) + struct.pack("<I", len(ne))
        head += b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", ty, offset)
        offset += _padded(ggml_nbytes(ne, ty))
    return head + b"\0" * (-len(head) % GGUF_ALIGN)


def gguf_file_size(kv, infos):
    """Size in bytes of the GGUF file GgufWriter writes for kv and infos."""
    return len(gguf_header(kv, infos)) + sum(_padded(ggml_nbytes(ne, ty)) for _, ne, ty in infos)


class GgufWriter:
    """Streams a GGUF file: the header at construction, then write_tensor for each info in order."""

    def __init__(self, f, kv, infos):
        self.f, self.infos, self.next = f, list(infos), 0
        f.write(gguf_header(kv, self.infos))

    def write_tensor(self, name, chunks):
        """chunks: an iterable of bytes objects that together are the tensor's data."""
        if self.next >= len(self.infos) or self.infos[self.next][0] != name:
            raise ValueError(f"tensor {name} is not the next one of the info table")
        _, ne, ty = self.infos[self.next]
        left = ggml_nbytes(ne, ty)
        for chunk in chunks:
            if len(chunk) > left:
                raise ValueError(f"tensor {name}: more data than its {ggml_nbytes(ne, ty)} bytes")
            self.f.write(chunk)
            left -= len(chunk)
        if left:
            raise ValueError(f"tensor {name}: {left} bytes missing")
        self.f.write(b"\0" * (-ggml_nbytes(ne, ty) % GGUF_ALIGN))
        self.next += 1

    def close(self):
        if self.next != len(self.infos):
            raise ValueError(f"{len(self.infos) - self.next} tensors not written")


def write_gguf(path, kv, tensors):
    """kv: [(key, kind, value)]; tensors: [(name, ne list, ggml type, bytes)], written whole."""
    with open(path, "wb") as f:
        w = GgufWriter(f, kv, [(name, ne, ty) for name, ne, ty, _ in tensors])
        for name, _, _, data in tensors:
            w.write_tensor(name, [data])
        w.close()


# ---- safetensors ----

def safetensors_header(tensors, metadata=None):
    """tensors: [(name, dtype, shape)] in file order -> (header bytes incl. the u64 length, data
    bytes). The header JSON is padded with spaces to a multiple of 8 bytes."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = int(np.prod(shape, dtype=np.int64)) * SAFETENSORS_DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, offset
