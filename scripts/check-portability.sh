#!/usr/bin/env bash
# Runs the numeric test binaries under every OpenBLAS kernel this CPU can execute
# (OPENBLAS_CORETYPE) with 1 and 2 threads, and reports per configuration and test family
# whether they passed and the largest observed error / tolerance (the margin), from the lines
# the tests' tolerance helpers write to $SINKSCOPE_TEST_MARGINS (tests/testing/tolerance.hpp).
#
# usage: scripts/check-portability.sh [BUILD_DIR] [OUT_DIR]
#   BUILD_DIR  a configured and built build directory (default: build)
#   OUT_DIR    where logs, margin files and the report go (default: BUILD_DIR/portability)
# environment:
#   CORETYPES     kernels to try (default: Prescott Nehalem Sandybridge Haswell Zen SkylakeX)
#   THREADS       thread counts to try (default: 1 2)
#   NUMERIC_TESTS test binaries to run (default: the metric, model, io and analysis ones below)
#   GTEST_FILTER  passed on to every binary (default: all tests)
# Exit status: 0 when every configuration that ran passed, 1 otherwise.
# The normal test run (ctest) is not affected: nothing here changes OpenBLAS settings globally.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd) || { echo "no build directory ${1:-build}" >&2; exit 2; }
out=${2:-$build/portability}
coretypes=${CORETYPES:-"Prescott Nehalem Sandybridge Haswell Zen SkylakeX"}
threads=${THREADS:-"1 2"}
# Numeric tests: float64 metric math, float32 model forwards against references and goldens
# (the zoo, llama2.c and llama.cpp dumps), the image preprocessing golden (test_io), the analysis
# pipeline and the metrics CLI. Left out: golden_io (exact comparisons of parsed files, no
# arithmetic), test_core, test_tokenizer, golden_tokenizer and test_report (no floating-point
# results compared against tolerances).
numeric=${NUMERIC_TESTS:-"test_metrics test_model golden_model integration_model test_io integration_analysis integration_cli"}
shared=${SINKSCOPE_SHARED:-$(cd "$repo/../shared" 2>/dev/null && pwd)}
[ -n "$shared" ] || { echo "../shared test material not found (set SINKSCOPE_SHARED)" >&2; exit 2; }

find_binary() {
    local p
    p=$(find "$build" -name "$1" -type f -perm -u+x -not -path "*/CMakeFiles/*" | head -n1)
    [ -n "$p" ] && echo "$p"
}

binaries=()
for b in $numeric; do
    if p=$(find_binary "$b"); then binaries+=("$p"); else echo "skip $b: not built in $build"; fi
done
[ ${#binaries[@]} -gt 0 ] || { echo "no numeric test binary found in $build" >&2; exit 2; }
probe=$(find_binary test_model || find_binary test_metrics)

# OUT_DIR holds only this script's files: never clear a folder it did not make.
if [ -e "$out" ] && [ ! -f "$out/.check-portability" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    echo "$out exists and was not written by check-portability.sh: choose another OUT_DIR" >&2
    exit 2
fi
rm -rf "$out"
mkdir -p "$out"
touch "$out/.check-portability"
start=$(date +%s)
configs=()
for core in $coretypes; do
    # Is this kernel usable here? OpenBLAS names the kernel it runs (OPENBLAS_VERBOSE=2) and
    # falls back to the detected one with "Core not found" for a name it does not know; a kernel
    # the CPU cannot execute dies with SIGILL (exit 132).
    log="$out/probe-$core.log"
    env OPENBLAS_CORETYPE="$core" OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
        SINKSCOPE_SHARED="$shared" "$probe" --gtest_filter='Gpt2.BlockMatchesConv1dDefinition' \
        >"$log" 2>&1
    rc=$?
    if [ $rc -eq 132 ]; then
        echo "skip $core: illegal instruction on this CPU"
        continue
    fi
    if grep -q "Core not found" "$log" || ! grep -q "^Core: $core\$" "$log"; then
        echo "skip $core: OpenBLAS ran $(grep -o 'Core: .*' "$log" | head -n1 || echo '?') instead"
        continue
    fi
    echo "$core: OpenBLAS runs $(grep -m1 '^Core: ' "$log")"
    for t in $threads; do
        cfg="$core-$t"
        mkdir -p "$out/$cfg"
        configs+=("$cfg")
        for bin in "${binaries[@]}"; do
            name=$(basename "$bin")
            t0=$(date +%s)
            # no OPENBLAS_VERBOSE here: its "Core:" line would break the CLI tests that expect
            # one line of error output (the probe above already checked which kernel runs)
            (cd "$(dirname "$bin")" &&
                env OPENBLAS_CORETYPE="$core" OPENBLAS_NUM_THREADS="$t" \
                    OMP_NUM_THREADS="$t" SINKSCOPE_SHARED="$shared" \
                    SINKSCOPE_TEST_MARGINS="$out/$cfg/$name.tsv" \
                    "$bin" --gtest_brief=1 ${GTEST_FILTER:+--gtest_filter="$GTEST_FILTER"}) \
                >"$out/$cfg/$name.log" 2>&1
            echo $? >"$out/$cfg/$name.rc"
            echo "$cfg $name: exit $(cat "$out/$cfg/$name.rc"), $(($(date +%s) - t0)) s"
        done
    done
done
elapsed=$(($(date +%s) - start))

python3 - "$out" "$elapsed" "${configs[@]}" <<'EOF' | tee "$out/report.md"
import collections, os, sys

out, elapsed, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
families = []
worst = {}          # (config, family) -> (ratio, observed, tol, test, what)
worst_family = {}   # family -> same, over every configuration
info = collections.defaultdict(lambda: (0.0, 0.0, 0.0, "", ""))  # not asserted lines
status = {}
for cfg in configs:
    for f in sorted(os.listdir(os.path.join(out, cfg))):
        if not f.endswith(".rc"):
            continue
        fam = f[:-3]
        if fam not in families:
            families.append(fam)
        status[(cfg, fam)] = open(os.path.join(out, cfg, f)).read().strip() == "0"
        path = os.path.join(out, cfg, fam + ".tsv")
        if not os.path.exists(path):
            continue
        for line in open(path):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                continue
            test, what, obs, tol = parts[0], parts[1], float(parts[2]), float(parts[3])
            ratio = obs / tol if tol > 0 else (0.0 if obs == 0 else float("inf"))
            rec = (ratio, obs, tol, test, what)
            if "not asserted" in what:
                if ratio > info[(cfg, fam)][0]:
                    info[(cfg, fam)] = rec
                continue
            if (cfg, fam) not in worst or ratio > worst[(cfg, fam)][0]:
                worst[(cfg, fam)] = rec
            if fam not in worst_family or ratio > worst_family[fam][0]:
                worst_family[fam] = rec + (cfg,)

print(f"# OpenBLAS portability: worst margin (observed error / tolerance) per test binary\n")
print(f"{len(configs)} configurations, {elapsed} s in all. A cell: pass/FAIL and the worst margin.\n")
print("| coretype-threads | " + " | ".join(families) + " |")
print("|---|" + "---|" * len(families))
all_pass = True
for cfg in configs:
    cells = []
    for fam in families:
        ok = status.get((cfg, fam))
        all_pass &= bool(ok)
        m = worst.get((cfg, fam))
        cells.append(("pass" if ok else "FAIL") + (f" {m[0]:.3f}" if m else ""))
    print(f"| {cfg} | " + " | ".join(cells) + " |")
print("\n## Worst margin per family, over every configuration\n")
for fam in families:
    if fam in worst_family:
        r, obs, tol, test, what, cfg = worst_family[fam]
        print(f"* {fam}: {r:.3f} ({obs:.3g} / {tol:.3g}) in {cfg}, {test}: {what}")
failed = []
for cfg in configs:
    for fam in families:
        if status.get((cfg, fam)):
            continue
        log = os.path.join(out, cfg, fam + ".log")
        names = sorted({l.split("]", 1)[1].split(",")[0].strip()
                        for l in open(log, errors="replace") if l.startswith("[  FAILED  ]")
                        and "listed below" not in l and " test" not in l.split("]", 1)[1][:8]})
        failed.append(f"* {cfg} {fam}: " + (", ".join(names) if names else "see " + log))
if failed:
    print("\n## Failures\n")
    print("\n".join(failed))
notes = [(k, v) for k, v in info.items() if v[3]]
if notes:
    print("\n## Logged, not asserted\n")
    for (cfg, fam), (r, obs, tol, test, what) in sorted(notes):
        print(f"* {cfg} {fam}: {r:.3f} ({obs:.3g} / {tol:.3g}) {test}: {what}")
sys.exit(0 if all_pass else 1)
EOF
