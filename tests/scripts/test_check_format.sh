#!/usr/bin/env bash
# Self-test of scripts/check-format.sh in a throwaway clone of this checkout (the checkout itself
# is never modified): passes on an unchanged tree, fails on a misformatted changed line, on a
# misformatted new untracked file and on a product line over 100 columns that clang-format leaves
# alone (a raw string), passes again once they are fixed.
# Usage: test_check_format.sh SOURCE_DIR. Exits 77 (skipped) when SOURCE_DIR is not a git checkout.
set -euo pipefail
src=$(cd "$1" && pwd)
if ! command -v git >/dev/null || ! git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "test_check_format: skipped: $src is not a git checkout (or git is missing)" >&2
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q --shared --no-checkout "$src" "$tmp/repo"
cd "$tmp/repo"
git checkout -q --detach "$(git -C "$src" rev-parse HEAD)"
# The working copy's scripts, so that uncommitted edits of the script are what is tested.
cp "$src/scripts/check-format.sh" scripts/check-format.sh
git add scripts/check-format.sh
git -c user.name=t -c user.email=t@t commit -q --allow-empty -m "script under test"

fail() { echo "test_check_format: FAILED: $*" >&2; exit 1; }
check() { scripts/check-format.sh >"$tmp/out" 2>&1; }

check || fail "unchanged tree reported: $(cat "$tmp/out")"

# A changed line that clang-format would rewrite (in a file that is otherwise left as it is).
target=src/core/progress.cpp
printf 'int   check_format_probe( int a ){return a;}\n' >>"$target"
if check; then fail "misformatted changed line passed"; fi
grep -q "check_format_probe" "$tmp/out" || fail "the offending line is not in the report"
clang-format -i "$target"
check || fail "formatted change reported: $(cat "$tmp/out")"
git checkout -q -- "$target"

# A raw string line of 120 columns: clang-format keeps it, the column check does not.
long=$(printf 'x%.0s' $(seq 1 100))
printf 'const char* check_format_long = R"(%s)";\n' "$long" >>"$target"
clang-format -i "$target"
if check; then fail "a product line over 100 columns passed"; fi
grep -q "$target:.*columns" "$tmp/out" || fail "the long line is not in the report"
git checkout -q -- "$target"

# A new file that git does not know yet.
printf 'namespace x {\nint   y( ){return 1;}\n}\n' >src/core/check_format_probe.cpp
if check; then fail "misformatted untracked file passed"; fi
clang-format -i src/core/check_format_probe.cpp
check || fail "formatted untracked file reported: $(cat "$tmp/out")"
echo "test_check_format: ok"
