#!/usr/bin/env bash
# Runs the libFuzzer reader targets for longer than ctest's bounded runs.
# Usage: scripts/fuzz.sh [-t SECONDS_PER_READER] [-j JOBS] [-b BUILD_DIR] [READER...]
#   READER: model hf_config cluster plan costdb inline_plan trace nccl_tests checkpoint (default: all that are built)
#   -t  seconds per reader (default 60)   -j  parallel fuzzing jobs per reader (default 1)
#   -b  build folder holding tests/fuzz/fuzz_<reader> (default: build)
# New interesting inputs go to BUILD_DIR/tests/fuzz/work/<reader>/, crashes to
# BUILD_DIR/tests/fuzz/crash/<reader>/. A crash is a bug: fix it and commit the input to
# tests/fuzz/regressions/<reader>/ (replayed by fuzz_replay_test and the bounded runs).
# Exit status: 0 no crash, 1 a reader crashed, 2 bad arguments or missing fuzz binaries.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; }
die() { echo "fuzz.sh: $*" >&2; usage; exit 2; }

seconds=60 jobs=1 build=build
all_readers=(model hf_config cluster plan costdb inline_plan trace nccl_tests checkpoint)
while getopts ":t:j:b:h" opt; do
  case "$opt" in
    t) seconds="$OPTARG" ;;
    j) jobs="$OPTARG" ;;
    b) build="$OPTARG" ;;
    h) usage; exit 0 ;;
    :) die "option -$OPTARG needs a value" ;;
    *) die "unknown option -$OPTARG" ;;
  esac
done
shift $((OPTIND - 1))
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "-t wants a whole number of seconds > 0, got '$seconds'"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "-j wants a whole number of jobs > 0, got '$jobs'"
[ -d "$build" ] || die "build folder '$build' does not exist (configure with: cmake --preset default)"
readers=("$@")
((${#readers[@]})) || readers=("${all_readers[@]}")
for r in "${readers[@]}"; do
  [[ " ${all_readers[*]} " == *" $r "* ]] || die "unknown reader '$r' (known: ${all_readers[*]})"
  [ -x "$build/tests/fuzz/fuzz_$r" ] ||
    die "$build/tests/fuzz/fuzz_$r is not built (needs clang++; build it with: cmake --build $build --target fuzz_$r)"
done

status=0
for r in "${readers[@]}"; do
  work="$build/tests/fuzz/work/$r" crash="$build/tests/fuzz/crash/$r"
  mkdir -p "$work" "$crash"
  dirs=("$work" tests/fuzz/corpus/"$r")
  [ -d tests/fuzz/regressions/"$r" ] && dirs+=(tests/fuzz/regressions/"$r")
  echo "== fuzz $r for ${seconds}s (${jobs} job(s)); corpus $work"
  parallel=()
  ((jobs > 1)) && parallel=(-fork="$jobs")
  if ! "$build/tests/fuzz/fuzz_$r" -max_total_time="$seconds" "${parallel[@]}" \
       -max_len=8192 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$crash/" "${dirs[@]}" 2> "$crash/log.txt"; then
    echo "fuzz $r: CRASH; inputs in $crash/ (log: $crash/log.txt):" >&2
    ls "$crash" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$crash/log.txt" | tail -n 2
  fi
done
exit "$status"
