#!/usr/bin/env bash
# Makes models/default (issue 53) with one command: builds the English corpus from the Debian
# packages' documentation (scripts/make_english_corpus.py), checks its sha256 against the one the
# shipped model was trained on, trains the recipe below with `sinkscope train` (one thread, seed
# 1) and copies what models/default holds into --out. The same packages, the same build and the
# same recipe give the same bytes; models/default/README.md lists the packages, the measured
# values and the runs tried.
#
# usage: scripts/make_default_model.sh [--out DIR] [--work DIR] [--sinkscope PATH]
#                                      [--steps N] [--any-corpus] [--switch FLAG]...
#   --out DIR        where the model goes (default: models/default.new; never overwritten:
#                    compare it with models/default, or move it there yourself)
#   --work DIR       the corpus and the training run (default: a new folder under ${TMPDIR:-/tmp},
#                    kept, its path printed at the end; about 100 MB)
#   --sinkscope PATH the tool (default: build/sinkscope; build it with
#                    `ninja -C build sinkscope`)
#   --steps N        train N steps instead of 10,000 and keep every checkpoint (a short check;
#                    the cosine schedule is then N steps long, so the weights differ from the
#                    full run's after the warm-up)
#   --any-corpus     train even when the corpus's sha256 differs from the shipped model's (other
#                    package versions): the model is then not the shipped one
#   --switch FLAG    one of train's switches, passed on (repeatable): --kv-bias, --no-bos,
#                    --attention-function=softmax_one or =sigmoid; trains a twin of the recipe
#                    (models/default/README.md, "The twins"), not the shipped model
#
# Needs: /usr/bin/python3 (the corpus script uses only its standard library) and the packages of
# `scripts/install-deps.sh --corpus`. About 15 minutes on one free core of a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# sha256 of the corpus the shipped model was trained on (make_english_corpus.py's defaults with
# the package versions of models/default/corpus_manifest.json, Debian 12).
TRAIN_SHA256=4ae5a6c54b96208fb142be2eb9a35fcc908c7e4c7a193d09f81fd7efbc4d7811
HELDOUT_SHA256=d715f32a7e34aa47c48234e9168c3fd06e2a29f8cb7413e8cb2ad5de54ada8ee
# The checkpoints kept (train writes one every 100 steps; how often does not change the weights):
# dense while the sink forms (steps 300-1,000), sparse after, so that models/default stays under
# 10 MB.
SHIP_STEPS=(100 200 400 600 800 1000 2000 5000 10000)

out=models/default.new
work=""
tool=build/sinkscope
steps=""
any_corpus=0
switches=()
die() {
  echo "make_default_model: error: $*" >&2
  exit 1
}
while (($#)); do
  case "$1" in
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --work) work=${2:?--work needs a folder}; shift 2 ;;
    --sinkscope) tool=${2:?--sinkscope needs a path}; shift 2 ;;
    --steps) steps=${2:?--steps needs a number}; shift 2 ;;
    --any-corpus) any_corpus=1; shift ;;
    --switch)
      case "${2:-}" in
        --kv-bias|--no-bos|--attention-function=softmax|--attention-function=softmax_one|--attention-function=sigmoid)
          switches+=("$2"); shift 2 ;;
        *) die "--switch takes --kv-bias, --no-bos or --attention-function=softmax|softmax_one|sigmoid, not '${2:-}'" ;;
      esac ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
if [ -n "$steps" ] && ! [[ "$steps" =~ ^[1-9][0-9]*$ ]]; then
  die "--steps must be a positive integer, not '$steps'"
fi
[ -x "$tool" ] || die "$tool is not an executable (build it: ninja -C build sinkscope, or pass --sinkscope)"
[ -x /usr/bin/python3 ] || die "/usr/bin/python3 not found (Debian's python3)"
if [ -e "$out" ]; then
  die "$out exists; remove it or name another --out (it is never overwritten)"
fi
if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/make_default_model.XXXXXX")
elif [ -e "$work/run" ]; then
  die "$work/run exists (an earlier run); remove it or name another --work"
fi
mkdir -p "$work"

echo "== corpus -> $work/corpus" >&2
/usr/bin/python3 scripts/make_english_corpus.py --out-dir "$work/corpus" >&2 ||
  die "the corpus script failed (its message is above)"
sums_ok=1
echo "$TRAIN_SHA256  $work/corpus/train.txt" | sha256sum --check --status || sums_ok=0
echo "$HELDOUT_SHA256  $work/corpus/heldout.txt" | sha256sum --check --status || sums_ok=0
if ((!sums_ok)); then
  msg="the corpus differs from the shipped model's (sha256 of train.txt $TRAIN_SHA256); compare
the package versions in $work/corpus/corpus_manifest.json with models/default/corpus_manifest.json"
  if ((any_corpus)); then
    echo "make_default_model: warning: $msg" >&2
  else
    die "$msg (--any-corpus trains on it anyway)"
  fi
fi

# The recipe (models/default/README.md says why): 4 layers x 4 heads, d_model 64, BPE 512,
# 32 sequences of BOS + 63 tokens per step, AdamW with weight decay 1.0, lr 1e-2 after 200
# warm-up steps, cosine to 1e-3 at step 10,000 (20.5M tokens).
cat > "$work/train_config.json" <<'JSON'
{
  "architecture": "llama",
  "d_model": 64,
  "n_layers": 4,
  "n_heads": 4,
  "d_mlp": 172,
  "seq_len": 64,
  "batch": 32,
  "steps": 10000,
  "warmup": 200,
  "lr": 0.01,
  "min_lr": 0.001,
  "weight_decay": 1.0,
  "beta1": 0.9,
  "beta2": 0.95,
  "adam_eps": 1e-08,
  "clip": 1.0,
  "init_std": 0.02,
  "vocab": 512,
  "checkpoint_every": 100
}
JSON
step_args=()
if [ -n "$steps" ]; then
  step_args=(--steps "$steps")
  if ((steps < 100)); then step_args+=(--checkpoint-every "$steps"); fi
fi

echo "== train -> $work/run (one thread, seed 1)" >&2
"$tool" train --config "$work/train_config.json" --text "$work/corpus/train.txt" \
  --out "$work/run" --threads 1 --seed 1 --progress never "${step_args[@]}" "${switches[@]}" >&2 ||
  die "sinkscope train failed (its message is above)"

# What models/default ships: the run less run.json and run_files.json (this machine's paths and
# times) and less the checkpoints not in SHIP_STEPS (with --steps: all are kept), the manifests
# cut to the checkpoints kept; plus the corpus's manifest (package versions, sizes, sha256).
rm -rf "$out.partial"
mkdir -p "$out.partial/checkpoints"
for f in config.json model.safetensors tokenizer.json train.log train_config.json; do
  cp "$work/run/$f" "$out.partial/$f"
done
ship=()
if [ -z "$steps" ]; then ship=("${SHIP_STEPS[@]}"); fi
/usr/bin/python3 - "$work/run" "$out.partial" "${ship[@]}" <<'PY' ||
import json, os, shutil, sys
run, out, ship = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
with open(os.path.join(run, "manifest.json")) as f:
    manifest = json.load(f)
have = {c["step"] for c in manifest["checkpoints"]}
missing = sorted(set(ship) - have)
if missing:
    sys.exit("no checkpoint at step %s in %s/manifest.json" % (missing, run))
keep = set(ship) if ship else have
manifest["checkpoints"] = [c for c in manifest["checkpoints"] if c["step"] in keep]
for c in manifest["checkpoints"]:
    shutil.copytree(os.path.join(run, c["path"]), os.path.join(out, c["path"]))
# The layout train writes (2-space indent, sorted keys), rows in its order.
with open(os.path.join(out, "manifest.json"), "w") as f:
    f.write(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
with open(os.path.join(run, "manifest.csv"), newline="") as f:
    lines = f.read().splitlines(True)
with open(os.path.join(out, "manifest.csv"), "w", newline="") as f:
    f.writelines([lines[0]] + [l for l in lines[1:] if int(l.split(",", 1)[0]) in keep])
PY
  die "could not copy the checkpoints and manifests (the message is above)"
cp "$work/corpus/corpus_manifest.json" "$out.partial/corpus_manifest.json"
if [ -f models/default/README.md ]; then cp models/default/README.md "$out.partial/README.md"; fi
mv "$out.partial" "$out"
echo "wrote $out (corpus and run kept in $work)" >&2
(cd "$out" && find . -type f ! -name README.md | LC_ALL=C sort | xargs sha256sum)
