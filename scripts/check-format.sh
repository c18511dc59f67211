#!/usr/bin/env bash
# Checks that every C++ file of the checkout (tracked ones, and new files git does not ignore) is
# formatted as the repo's .clang-format says, and that no line of the product sources (src/,
# include/, apps/, python/src/) is longer than 100 columns (raw strings and the like, which
# clang-format leaves alone, included). Prints what clang-format would change, as a diff per file,
# and every long line; exits 1 when there is any, 77 (skipped) when the tree is not a git
# checkout. Fix the formatting with
#   clang-format -i FILE...
# and a long raw string by splitting it into adjacent literals R"(...)" R"(...)" (the same bytes).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly SKIP=77
readonly MAX_COLUMNS=100

if ! command -v git >/dev/null || [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$(pwd -P)" ]; then
  echo "check-format: skipped: $(pwd) is not a git checkout (or git is missing)" >&2
  exit $SKIP
fi
formatter=$(command -v clang-format || true)
if [ -z "$formatter" ]; then
  echo "check-format: clang-format is required (Debian: clang-format)" >&2
  exit 2
fi

pathspecs=('*.cpp' '*.cc' '*.cxx' '*.hpp' '*.hh' '*.h' ':!third_party')
files=()
while IFS= read -r -d '' f; do
  [ -f "$f" ] && files+=("$f")  # a tracked file deleted in the working tree is not checked
done < <(git ls-files -z --cached --others --exclude-standard -- "${pathspecs[@]}" | sort -zu)

bad=0
for f in "${files[@]}"; do
  if ! "$formatter" -style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" -; then
    bad=1
  fi
  case "$f" in
    src/* | include/* | apps/* | python/src/*)
      if awk -v max=$MAX_COLUMNS -v f="$f" \
        'length($0) > max { printf "%s:%d: %d columns\n", f, NR, length($0); found = 1 }
         END { exit !found }' "$f"; then
        bad=1
      fi
      ;;
  esac
done

if [ $bad -ne 0 ]; then
  echo "check-format: the files above are not clang-format clean or have lines over" \
    "$MAX_COLUMNS columns" >&2
  exit 1
fi
echo "check-format: ${#files[@]} C++ files are clang-format clean, product lines within" \
  "$MAX_COLUMNS columns"
