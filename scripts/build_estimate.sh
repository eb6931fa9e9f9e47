#!/usr/bin/env bash
# Prints one line: about how long building the named targets takes on this machine, from the
# number of files left to compile and a measured cost per file. Usage: scripts/build_estimate.sh TARGET...
# The cost: 6 CPU-seconds a file on average at the default preset's -O2 -g (six of our sources
# timed without ccache on a 2-core AMD EPYC VM, 2026-11-28: 2.5-14 s, the CLI's the heaviest).
set -euo pipefail
cd "$(dirname "$0")/.."
per_file_cpu_s=6
cores=$(nproc)
if [ -f build/Makefile ]; then
  # make -n lists what is out of date; -k goes on past a target this configuration lacks.
  files=$(make -nk -C build "$@" 2>/dev/null | grep -c 'Building CXX' || true)
  what="$files files left to compile"
else
  dirs=(model traces planner executor profiler cli)
  if [ -d /usr/include/x86_64-linux-gnu/qt6 ] || [ -d /usr/include/qt6 ]; then dirs+=(gui); fi
  files=$(find "${dirs[@]}" -name '*.cpp' -not -path '*/cuda/*' | wc -l)
  what="a first build, about $files files"
fi
seconds=$((files * per_file_cpu_s / cores))
if ((files == 0)); then
  echo "build ($*): up to date"
elif ((seconds < 90)); then
  echo "build ($*): $what, about $((seconds < 10 ? 10 : seconds)) s on this machine's $cores cores"
else
  echo "build ($*): $what, about $(((seconds + 30) / 60)) min on this machine's $cores cores" \
       "($per_file_cpu_s CPU-s a file; a compiler cache or an earlier build makes it shorter)"
fi
