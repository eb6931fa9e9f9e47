#!/bin/sh
# expect_failure.sh MAX_SECONDS REGEX COMMAND...
# Passes when COMMAND exits non-zero within MAX_SECONDS (no hang) and its output matches REGEX.
max="$1"; regex="$2"; shift 2
out=$(timeout "$max" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 124 ]; then echo "FAIL: still running after ${max}s (hang)"; exit 1; fi
if [ "$rc" -eq 0 ]; then echo "FAIL: exited 0, expected an error"; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq "$regex"; then echo "FAIL: output does not match /$regex/"; exit 1; fi
echo "PASS: exit $rc, matched /$regex/"
