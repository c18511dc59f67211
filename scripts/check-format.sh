#!/usr/bin/env bash
# Checks that the C++ lines changed since a base commit are formatted by the repo's .clang-format
# (clang-format-diff: only changed lines, so it is fast and the older, not fully formatted code
# does not fail it). Prints the formatting diff and exits 1 when a changed line is not formatted;
# exits 77 (skipped) when the tree is not a git checkout or the base commit is not in it.
#
# Base: CHECK_FORMAT_BASE if set, else the merge-base with origin/main when that exists and is
# not HEAD itself, else the fixed commit below (the last one before this check existed). The
# working tree is compared with the base, so committed, staged and unstaged changes and new
# untracked files are all checked. Fix what it reports with
#   git diff -U0 BASE | clang-format-diff -p1 -i -binary clang-format
set -euo pipefail
cd "$(dirname "$0")/.."

readonly FIXED_BASE=023282f
readonly SKIP=77

if ! command -v git >/dev/null || [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$(pwd -P)" ]; then
  echo "check-format: skipped: $(pwd) is not a git checkout (or git is missing)" >&2
  exit $SKIP
fi

base=${CHECK_FORMAT_BASE:-}
if [ -z "$base" ]; then
  if git rev-parse --verify -q origin/main >/dev/null; then
    base=$(git merge-base HEAD origin/main)
  fi
  # On main itself (CI's clone: the merge-base is HEAD) the fixed base, so that everything
  # changed since the check existed stays checked.
  if [ -z "$base" ] || [ "$(git rev-parse "$base")" = "$(git rev-parse HEAD)" ]; then
    base=$FIXED_BASE
  fi
fi
if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
  echo "check-format: skipped: base commit $base is not in this checkout (shallow clone?)" >&2
  exit $SKIP
fi

# clang-format-diff runs a `clang-format-NN` by default; use the unversioned one when present.
formatter=$(command -v clang-format || true)
differ=$(command -v clang-format-diff || true)
if [ -z "$formatter" ] || [ -z "$differ" ]; then
  echo "check-format: clang-format and clang-format-diff are required (Debian: clang-format)" >&2
  exit 2
fi

readonly CXX_REGEX='.*\.(cpp|cc|cxx|hpp|hh|h)'
pathspecs=('*.cpp' '*.cc' '*.cxx' '*.hpp' '*.hh' '*.h' ':!third_party')

out=$(mktemp)
trap 'rm -f "$out"' EXIT
{
  git diff -U0 --no-color --no-ext-diff "$base" -- "${pathspecs[@]}"
  # New files that are not yet added: every line of them is a changed line.
  git ls-files --others --exclude-standard -z -- "${pathspecs[@]}" |
    while IFS= read -r -d '' f; do
      git diff -U0 --no-color --no-index /dev/null "$f" || true
    done
} | "$differ" -p1 -regex "$CXX_REGEX" -style file -binary "$formatter" >"$out"

if [ -s "$out" ]; then
  cat "$out"
  echo "check-format: the lines above, changed since $base, are not clang-format clean" >&2
  exit 1
fi
echo "check-format: changed C++ lines since $base are clang-format clean"
