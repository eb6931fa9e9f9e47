#!/usr/bin/env bash
# Fails when a test ran nothing or skipped without saying it may. Reads ctest's log of the last
# run (BUILD/Testing/Temporary/LastTest.log) and flags every test whose output
#   - is a GoogleTest run of zero tests ("Running 0 tests" / "0 tests from 0 test suites ran"), or
#   - reports a skipped test ("[  SKIPPED ]") whose ctest name matches no line of the expected
#     skips file (tests/expected_skips.txt: "<ctest name regex> <why>", # comments).
# Usage: scripts/check_test_log.sh [BUILD_DIR]   (default: build). Exit: 0 clean, 1 flagged, 2 usage.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
log="$build/Testing/Temporary/LastTest.log"
expected=tests/expected_skips.txt
if (($# > 1)); then echo "usage: scripts/check_test_log.sh [BUILD_DIR]" >&2; exit 2; fi
if [ ! -f "$log" ]; then echo "check_test_log: $log does not exist (run ctest in $build first)" >&2; exit 2; fi
if [ ! -f "$expected" ]; then echo "check_test_log: $expected is missing" >&2; exit 2; fi

# One "name<TAB>zero|skip" line per offending test.
flagged=$(awk '
  /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); name = $0; zero = 0; skip = 0; next }
  /Running 0 tests from|\[==========\] 0 tests from 0 test suites ran/ { zero = 1 }
  /^\[  SKIPPED \] [A-Za-z_]/ { skip = 1 }
  /^"[^"]*" end time:/ || /^Test (Passed|Failed)|^Test time/ {
    if (name != "") { if (zero) print name "\tzero"; if (skip) print name "\tskip" }
    name = ""
  }' "$log" | sort -u)

bad=0 checked=$(grep -c -E '^[0-9]+/[0-9]+ Test: ' "$log" || true)
while IFS=$'\t' read -r name what; do
  [ -n "$name" ] || continue
  if [ "$what" = skip ]; then
    allowed=0
    while read -r regex _; do
      [[ -z "$regex" || "$regex" == \#* ]] && continue
      if [[ "$name" =~ ^($regex)$ ]]; then allowed=1; break; fi
    done < "$expected"
    ((allowed)) && continue
    echo "check_test_log: $name skipped a test not listed in $expected" >&2
  else
    echo "check_test_log: $name ran zero tests (its filter or registration matches nothing)" >&2
  fi
  bad=1
done <<< "$flagged"
if ((bad)); then exit 1; fi
echo "check_test_log: $checked tests checked in $log: none ran zero tests, no unexpected skips"
