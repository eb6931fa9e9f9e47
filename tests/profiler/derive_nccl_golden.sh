#!/bin/sh
# Derives the expected values of nccl_tests_golden_test.cpp from the real outputs in
# tests/data/nccl-tests/ with awk alone (independent of the C++ parser):
#   ranks  = number of "# ... Rank N ..." lines; hosts = distinct words after "on" in them
#   rows   = data rows (first field numeric) with size > 0
#   for the largest size: time of both columns, and busbw = size / time_us / 1e3 x factor(n)
#   (nccl-tests doc/PERFORMANCE.md: all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n).
# Usage: tests/profiler/derive_nccl_golden.sh tests/data/nccl-tests/*.txt
for f in "$@"; do
  awk -v file="$(basename "$f")" '
    /^#/ && / Rank / { ranks++; for (i = 1; i < NF; i++) if ($i == "on") host[$(i + 1)] = 1 }
    /^#/ && / size / && / count / { ncol = NF - 1 }
    $1 ~ /^[0-9]+$/ && $1 > 0 {
      rows++; if (first == "") first = $1; last = $1
      # the last 8 fields: oop time algbw busbw err, ip time algbw busbw err
      oop = $(NF - 7); ip = $(NF - 3); pb_oop = $(NF - 5); pb_ip = $(NF - 1)
    }
    END {
      n = 0; for (h in host) n++
      f = (file ~ /all_reduce/) ? 2 * (ranks - 1) / ranks : (ranks - 1) / ranks
      printf "%s ranks=%d hosts=%d rows=%d first=%s last=%s oop_time_us=%s ip_time_us=%s busbw_oop=%.4f busbw_ip=%.4f printed=%s/%s\n",
        file, ranks, n, rows, first, last, oop, ip, last / oop / 1e3 * f, last / ip / 1e3 * f, pb_oop, pb_ip
    }' "$f"
done
