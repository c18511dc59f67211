#!/usr/bin/env python3
"""Hugging Face transformers on the GPU over the zoo's golden inputs, for the CUDA tests.

For every model directory of the zoo (../shared/zoo: config.json and golden/), loads the model
with the class its config.json names, in float32 with eager attention, on --device (cuda), TF32
off (IEEE float32 products and convolutions, as the goldens and sinkscope compute), and writes for
every golden input, fed exactly as the golden was (input_ids and token_type_ids, or pixel_values):

    OUT/<model>/<input>/attentions.npy   float32 [layers, heads, T, T]   (output_attentions)
    OUT/<model>/<input>/logits.npy       float32, the shape of the golden logits.npy

plus OUT/versions.json. It compares nothing: tests/model/golden_cuda.cpp
(ZooCuda.MatchesTransformersOnCuda, given OUT in SINKSCOPE_TRANSFORMERS_DUMPS) compares these with
the goldens and with sinkscope on the GPU, within the float32 bound derived there.

scripts/gpu-check.sh runs it with the Python that holds the pip PyTorch (not Debian's):

    python3 scripts/hf_zoo_attention.py --zoo ../shared/zoo --out build-gpu/gpu-check/transformers

Exit status: 0 when every model ran; 1 when one failed (named on stderr, the others still run);
2 when torch or transformers cannot be imported or OUT is not this script's.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

MARKER = ".hf_zoo_attention"  # OUT holds only this script's files: never clear another folder


def ieee_float32(torch):
    """TF32 off for cuBLAS products and cuDNN convolutions (ViT's patch embedding)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision"):  # PyTorch >= 2.9, where the old flags are deprecated
        matmul.fp32_precision = "ieee"
        cudnn.conv.fp32_precision = "ieee"
    else:
        matmul.allow_tf32 = False
        cudnn.allow_tf32 = False


def load(transformers, torch, model_dir, device):
    arch = json.loads((model_dir / "config.json").read_text())["architectures"][0]
    cls = getattr(transformers, arch)
    # transformers 5 renamed torch_dtype to dtype.
    dtype_key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    model = cls.from_pretrained(str(model_dir), attn_implementation="eager",
                                **{dtype_key: torch.float32})
    model = model.to(device).eval()
    wrong = {str(p.dtype) for p in model.parameters() if p.dtype != torch.float32}
    if wrong:
        raise RuntimeError(f"parameters in {sorted(wrong)}, not float32")
    return model


def run_input(torch, model, golden, device):
    """attentions [L, H, T, T] and logits of one golden input, as float32 numpy arrays."""
    if (golden / "pixel_values.npy").exists():
        px = torch.from_numpy(np.load(golden / "pixel_values.npy")).float()  # [C, H, W]
        kwargs = {"pixel_values": px[None].to(device)}
    else:
        ids = torch.from_numpy(np.load(golden / "input_ids.npy")).long()  # [T]
        kwargs = {"input_ids": ids[None].to(device)}
        if (golden / "token_type_ids.npy").exists():
            types = torch.from_numpy(np.load(golden / "token_type_ids.npy")).long()
            kwargs["token_type_ids"] = types[None].to(device)
    with torch.no_grad():
        out = model(**kwargs, output_attentions=True)
    attentions = torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()
    logits = out.logits.float().cpu().numpy()
    want = np.load(golden / "attentions.npy", mmap_mode="r").shape
    if attentions.shape != want:
        raise RuntimeError(f"{golden.name}: attentions {attentions.shape}, golden {want}")
    want = np.load(golden / "logits.npy", mmap_mode="r").shape
    if logits.size != int(np.prod(want)):
        raise RuntimeError(f"{golden.name}: logits {logits.shape}, golden {want}")
    return attentions, logits.reshape(want)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", type=Path, required=True, help="the zoo folder (../shared/zoo)")
    ap.add_argument("--out", type=Path, required=True, help="output folder (replaced whole)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", nargs="*", help="model folders of the zoo (default: every one)")
    args = ap.parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"hf_zoo_attention: {e}", file=sys.stderr)
        return 2
    if args.out.exists() and not (args.out / MARKER).exists() and any(args.out.iterdir()):
        print(f"hf_zoo_attention: {args.out} exists and was not written by this script",
              file=sys.stderr)
        return 2
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    (args.out / MARKER).touch()
    ieee_float32(torch)
    device = torch.device(args.device)
    (args.out / "versions.json").write_text(json.dumps({
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
    }, indent=1) + "\n")

    names = args.models or sorted(d.name for d in args.zoo.iterdir()
                                  if (d / "config.json").exists() and (d / "golden").is_dir())
    failed = []
    for name in names:
        try:
            model = load(transformers, torch, args.zoo / name, device)
            inputs = sorted(d for d in (args.zoo / name / "golden").iterdir() if d.is_dir())
            for golden in inputs:
                attentions, logits = run_input(torch, model, golden, device)
                out = args.out / name / golden.name
                out.mkdir(parents=True)
                np.save(out / "attentions.npy", attentions.astype(np.float32))
                np.save(out / "logits.npy", logits.astype(np.float32))
            print(f"{name}: {len(inputs)} inputs")
            del model
        except Exception as e:  # noqa: BLE001 - one model's failure must not hide the others
            print(f"hf_zoo_attention: {name}: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(name)
    print(f"transformers {transformers.__version__} on {args.device}: "
          f"{len(names) - len(failed)} of {len(names)} models ran"
          + (f"; failed: {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
