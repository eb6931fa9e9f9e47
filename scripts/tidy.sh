#!/usr/bin/env bash
# clang-tidy with the project's .clang-tidy on the C++ sources a change touches: files changed
# since the merge base with the main branch (plus uncommitted ones), or every source when no merge
# base can be found (a fresh clone without main, a detached checkout). On main itself (a clean clone
# of main, as in CI) the change is the tip commit. Headers are checked through
# the sources that include them (HeaderFilterRegex).
# Usage: scripts/tidy.sh [-b BUILD_DIR] [-r BASE_REF] [--all] [FILE...]
#   -b  build folder with compile_commands.json (default: build)
#   -r  compare against this ref (default: main, then origin/main)
#   --all  every source file; FILE...  exactly these files
# Exit: 0 clean, 1 findings, 2 bad arguments or no compilation database.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "tidy.sh: $*" >&2; exit 2; }
build=build base="" all=0 files=()
while (($#)); do
  case "$1" in
    -b) (($# >= 2)) || die "-b needs a build folder"; build="$2"; shift 2 ;;
    -r) (($# >= 2)) || die "-r needs a git ref"; base="$2"; shift 2 ;;
    --all) all=1; shift ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) [ -f "$1" ] || die "no such file: $1"; files+=("$1"); shift ;;
  esac
done
[ -f "$build/compile_commands.json" ] || die "$build/compile_commands.json missing (configure first: cmake --preset default)"
tidy=$(command -v clang-tidy || command -v clang-tidy-14 || true)
[ -n "$tidy" ] || die "clang-tidy is not installed (Debian: apt-get install clang-tidy)"

# Our C++ sources in the compilation database (CUDA and generated files excluded).
in_db() { grep -q "\"file\": \"$PWD/$1\"" "$build/compile_commands.json"; }
if ((${#files[@]} == 0)); then
  if ((all == 0)); then
    if [ -z "$base" ]; then
      for ref in main origin/main; do
        if git rev-parse -q --verify "$ref^{commit}" >/dev/null && mb=$(git merge-base HEAD "$ref" 2>/dev/null); then
          base="$mb"; break
        fi
      done
      # On main itself (CI's clean clone) the change is the tip commit: its first parent is the base.
      if [ -n "$base" ] && [ "$base" = "$(git rev-parse HEAD)" ] && git rev-parse -q --verify HEAD~1 >/dev/null; then
        base=$(git rev-parse HEAD~1)
      fi
    else
      base=$(git merge-base HEAD "$base" 2>/dev/null) || die "no merge base between HEAD and $base"
    fi
  fi
  if ((all)) || [ -z "$base" ]; then
    echo "tidy.sh: checking every source (no merge base with main)"
    mapfile -t files < <(git ls-files '*.cpp')
  else
    echo "tidy.sh: checking sources changed since $(git rev-parse --short "$base")"
    mapfile -t files < <({ git diff --name-only --diff-filter=d "$base" -- '*.cpp' '*.h'; git ls-files --others --exclude-standard '*.cpp' '*.h'; } | sort -u)
  fi
fi
# A changed header is checked through the sources beside it.
sources=()
for f in "${files[@]}"; do
  case "$f" in
    *.h) for s in "${f%.h}.cpp"; do [ -f "$s" ] && sources+=("$s"); done ;;
    *.cpp) sources+=("$f") ;;
  esac
done
checked=()
for s in $(printf '%s\n' "${sources[@]}" | sort -u); do in_db "$s" && checked+=("$s"); done
if ((${#checked[@]} == 0)); then echo "tidy.sh: no changed C++ sources to check"; exit 0; fi
echo "tidy.sh: ${#checked[@]} file(s)"
jobs=$(nproc 2>/dev/null || echo 2)
printf '%s\n' "${checked[@]}" | xargs -P "$jobs" -n 4 "$tidy" -p "$build" --quiet 2>/dev/null > "$build/tidy.log" || status=$?
if [ -s "$build/tidy.log" ] && grep -qE "(warning|error):" "$build/tidy.log"; then
  cat "$build/tidy.log"
  echo "tidy.sh: findings above ($build/tidy.log)" >&2
  exit 1
fi
if [ "${status:-0}" -ne 0 ]; then cat "$build/tidy.log"; echo "tidy.sh: clang-tidy failed" >&2; exit 1; fi
echo "tidy.sh: clean"
