#!/usr/bin/env bash
# The GPU path, checked (issue 47) on a machine with a CUDA GPU, a pip PyTorch 2.x with CUDA and
# Hugging Face transformers:
#  1. builds sinkscope in BUILD_DIR (default build-gpu) against that PyTorch's libtorch (its C++
#     ABI, the Gloo it carries; googletest rebuilt from source when it uses the pre-C++11 ABI);
#  2. runs transformers on the GPU over every zoo golden input (scripts/hf_zoo_attention.py);
#  3. runs the ctest tests that need CUDA (ctest -R Cuda: tests/model/golden_cuda.cpp, the zoo on
#     the GPU against its CPU goldens, against the CPU run and against transformers' GPU run,
#     within the float32 bound derived there), where a skipped test counts as a failure;
#  4. runs `sinkscope dump --device cuda` once, end to end;
# and prints one line per step. Exit status: 0 when every step passed, 1 otherwise; 77 after one
# line, before building anything, where there is no CUDA GPU (no nvidia-smi, no GPU listed, no
# PyTorch, or torch.cuda.is_available() false). The Debian build (./build) needs none of this.
#
# usage: scripts/gpu-check.sh
# environment:
#   PYTHON            the Python with the pip PyTorch and transformers (default: python3)
#   BUILD_DIR         build directory (default: build-gpu; never the Debian build's ./build)
#   SINKSCOPE_SHARED  the test material holding zoo/ (default: ../shared, else ./shared)
#   ZOO_MODELS        zoo models to check, space-separated (default: every one; a machine that
#                     gets only part of the zoo checks that part, and the summary says which)
#   JOBS              build jobs (default: the core count)
#   GTEST_SOURCE_DIR  googletest sources for a pre-C++11-ABI PyTorch (default /usr/src/googletest,
#                     Debian's googletest package)
#   CMAKE_PREFIX_PATH (read by CMake itself) where the other build dependencies are, when not in
#                     the system folders (scripts/install-deps.sh names them)
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

# ---- is there a CUDA GPU? One line and exit 77 where not, before anything is built ---------------
not_here() {
    echo "gpu-check: no CUDA GPU here ($1): nothing checked"
    exit 77
}
command -v nvidia-smi >/dev/null 2>&1 || not_here "no nvidia-smi"
[ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -gt 0 ] || not_here "nvidia-smi lists no GPU"
command -v "$python" >/dev/null 2>&1 || not_here "no $python"
probe=$("$python" - 2>/dev/null <<'EOF'
import torch
print(torch.__version__)
print(torch.version.cuda or "none")
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.utils.cmake_prefix_path)
ok = torch.cuda.is_available() and torch.cuda.device_count() > 0
print(int(ok))
print(torch.cuda.get_device_name(0) if ok else "-")
EOF
) || not_here "no PyTorch in $python"
mapfile -t info <<<"$probe"
torch_version=${info[0]} torch_cuda=${info[1]} abi=${info[2]} torch_prefix=${info[3]}
[ "${info[4]}" = 1 ] || not_here "torch $torch_version (CUDA $torch_cuda) sees no CUDA device"
gpu_name=${info[5]}

# ---- what the steps need -------------------------------------------------------------------------
transformers_version=$("$python" -c 'import transformers; print(transformers.__version__)' \
                       2>/dev/null) || transformers_version=""
build=${BUILD_DIR:-$repo/build-gpu}
mkdir -p "$build"
build=$(cd "$build" && pwd)
if [ "$build" = "$repo/build" ]; then
    echo "gpu-check: BUILD_DIR is the Debian build ($build): choose another folder"
    exit 1
fi
shared=${SINKSCOPE_SHARED:-}
if [ -z "$shared" ]; then
    for d in "$repo/../shared" "$repo/shared"; do
        if [ -d "$d/zoo" ]; then shared=$(cd "$d" && pwd); break; fi
    done
fi
if [ -z "$shared" ] || [ ! -d "$shared/zoo" ]; then
    echo "gpu-check: no zoo test material (set SINKSCOPE_SHARED to the folder holding zoo/)"
    exit 1
fi
work=$build/gpu-check  # this script's logs and outputs, replaced on every run
rm -rf "$work"
mkdir -p "$work"
jobs=${JOBS:-$(nproc)}

models=${ZOO_MODELS:-}
echo "gpu-check: $gpu_name; torch $torch_version (CUDA $torch_cuda, C++11 ABI $abi);" \
     "transformers ${transformers_version:-missing}; zoo models: ${models:-all}; logs in $work"

failed=()
# step NAME LOG CMD...: runs CMD with its output in LOG and prints NAME, ok / FAILED and seconds.
step() {
    local name=$1 log=$2 start rc
    shift 2
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    if [ "$rc" = 0 ]; then
        printf '  %-34s ok      %4d s\n' "$name" $(($(date +%s) - start))
    else
        printf '  %-34s FAILED  %4d s  (exit %d, %s)\n' "$name" $(($(date +%s) - start)) "$rc" \
               "$log"
        failed+=("$name")
    fi
    return "$rc"
}
not_run() {
    printf '  %-34s not run (%s)\n' "$1" "$2"
    failed+=("$1")
}

# ---- 1. build ------------------------------------------------------------------------------------
# Every module gets the ABI that libtorch was built with (std::string crosses between them); a
# pre-C++11-ABI libtorch also needs a googletest built that way (Debian's libgtest has the new
# one). Gloo comes with a pip libtorch, headers and code (CMakeLists.txt
# SINKSCOPE_TORCH_BUNDLES_GLOO). No Python bindings and benchmarks: not part of this check.
extra=()
gtest_ok=1
if [ "$abi" = 0 ]; then
    gtest_src=${GTEST_SOURCE_DIR:-/usr/src/googletest}
    if [ -f "$gtest_src/CMakeLists.txt" ]; then
        # shellcheck disable=SC2317  # run through step
        gtest_build() {
            cmake -S "$gtest_src" -B "$build/googletest-abi0" -DCMAKE_BUILD_TYPE=Release \
                  -DCMAKE_CXX_FLAGS=-D_GLIBCXX_USE_CXX11_ABI=0 -DBUILD_GMOCK=OFF \
                  -DCMAKE_INSTALL_PREFIX="$build/googletest-abi0/install" &&
                cmake --build "$build/googletest-abi0" -j "$jobs" --target install
        }
        if step "googletest (pre-C++11 ABI)" "$work/googletest.log" gtest_build; then
            config=$(find "$build/googletest-abi0/install" -name GTestConfig.cmake | head -n 1)
            extra+=("-DGTest_DIR=$(dirname "$config")")
        else
            gtest_ok=0
        fi
    else
        not_run "googletest (pre-C++11 ABI)" "no sources at $gtest_src: set GTEST_SOURCE_DIR"
        gtest_ok=0
    fi
fi
built_tests=0 built_cli=0
if [ "$gtest_ok" = 1 ] &&
    step "configure ($(basename "$build"))" "$work/configure.log" \
         cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release \
               -DCMAKE_PREFIX_PATH="$torch_prefix" -DTorch_DIR="$torch_prefix/Torch" "${extra[@]}" \
               -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$abi" \
               -DSINKSCOPE_TORCH_BUNDLES_GLOO=ON -DSINKSCOPE_BUILD_PYTHON=OFF \
               -DSINKSCOPE_BUILD_BENCH=OFF -DSINKSCOPE_SHARED_DIR="$shared"; then
    step "build golden_model" "$work/build-tests.log" \
         cmake --build "$build" -j "$jobs" --target golden_model && built_tests=1
    step "build sinkscope" "$work/build-cli.log" \
         cmake --build "$build" -j "$jobs" --target sinkscope && built_cli=1
else
    not_run "build" "configure failed"
fi

# ---- 2. transformers on the GPU ------------------------------------------------------------------
dumps=$work/transformers
if [ -n "$transformers_version" ]; then
    # shellcheck disable=SC2086  # ZOO_MODELS is a list of names
    step "transformers $transformers_version on GPU" "$work/transformers.log" \
         "$python" "$repo/scripts/hf_zoo_attention.py" --zoo "$shared/zoo" --out "$dumps" \
         ${models:+--models $models}
else
    not_run "transformers on GPU" "transformers not importable in $python"
fi

# ---- 3. the CUDA tests ---------------------------------------------------------------------------
if [ "$built_tests" = 1 ]; then
    ctest_log=$work/ctest.log
    select=(-R Cuda)
    if [ -n "$models" ]; then
        # The zoo tests of the models not chosen (names end in /<model>) are left out.
        others=$(ctest --test-dir "$build" -N -R 'ZooCuda\.' |
                     sed -n 's|.*ZooCuda\.[A-Za-z]*/\([A-Za-z0-9_]*\).*|\1|p' | sort -u |
                     grep -vxF -f <(tr ' ' '\n' <<<"$models"))
        if [ -n "$others" ]; then
            select+=(-E "ZooCuda\.[A-Za-z]+/($(paste -sd'|' <<<"$others"))( |\$)")
        fi
    fi
    # shellcheck disable=SC2317  # run through step
    cuda_tests() {
        local out rc total failed skipped
        out=$(env SINKSCOPE_TRANSFORMERS_DUMPS="$dumps" \
                  ctest --test-dir "$build" "${select[@]}" --output-on-failure 2>&1)
        rc=$?
        echo "$out"
        # ctest counts a skipped test as passed; here, on a GPU, it is a failure.
        total=$(grep -Eo 'tests failed out of [0-9]+' <<<"$out" | grep -Eo '[0-9]+$')
        failed=$(grep -Eo '[0-9]+ tests failed out of' <<<"$out" | grep -Eo '^[0-9]+')
        skipped=$(grep -c '(Skipped)' <<<"$out")
        echo "$((${total:-0} - ${failed:-0} - skipped)) passed, ${failed:-0} failed," \
             "$skipped skipped of ${total:-0} CUDA tests"
        [ "$rc" = 0 ] && [ "${total:-0}" -gt 0 ] && [ "$skipped" = 0 ]
    }
    step "ctest -R Cuda" "$ctest_log" cuda_tests
    echo "    $(tail -n 1 "$ctest_log")"
else
    not_run "ctest -R Cuda" "golden_model not built"
fi

# ---- 4. the command line on the GPU --------------------------------------------------------------
# A text model of the chosen ones (gpt2 by default) and its first golden input.
dump_model=gpt2
if [ -n "$models" ] && ! grep -qw gpt2 <<<"$models"; then
    dump_model=""
    for m in $models; do
        if compgen -G "$shared/zoo/$m/golden/*/input_ids.npy" >/dev/null; then
            dump_model=$m
            break
        fi
    done
fi
if [ "$built_cli" = 1 ] && [ -n "$dump_model" ]; then
    first=$(compgen -G "$shared/zoo/$dump_model/golden/*/input_ids.npy" | sort | head -n 1)
    golden_input=$(dirname "$first")
    "$python" -c 'import json, sys, numpy
print(json.dumps({"ids": numpy.load(sys.argv[1]).tolist()}))' "$first" >"$work/ids.jsonl"
    # shellcheck disable=SC2317  # run through step
    dump_and_check() {
        "$build/sinkscope" dump --model "$shared/zoo/$dump_model" --device cuda \
                                --data "$work/ids.jsonl" --out "$work/dump" &&
            "$python" - "$work/dump/attention.npy" "$golden_input/attentions.npy" <<'EOF'
import sys, numpy
got, golden = numpy.load(sys.argv[1]), numpy.load(sys.argv[2])
assert got.shape == (1,) + golden.shape, f"attention {got.shape}, golden {golden.shape}"
print(f"attention {got.shape}: max |diff| to the golden {abs(got[0] - golden).max():.2e}")
EOF
    }
    step "sinkscope dump --device cuda" "$work/dump.log" dump_and_check &&
        echo "    $dump_model $(basename "$golden_input"): $(tail -n 1 "$work/dump.log")"
elif [ -z "$dump_model" ]; then
    not_run "sinkscope dump --device cuda" "no text model among ZOO_MODELS"
else
    not_run "sinkscope dump --device cuda" "sinkscope not built"
fi

if [ ${#failed[@]} = 0 ]; then
    echo "gpu-check: all passed"
    exit 0
fi
echo "gpu-check: FAILED: $(printf '%s; ' "${failed[@]}" | sed 's/; $//')"
exit 1
