#!/usr/bin/env python3
"""Derives the golden numbers of kineto_golden_test.cpp from the raw Kineto traces with gzip+json,
independently of the C++ reader. Run: python3 tests/traces/derive_golden.py tests/data/traces/kineto"""
import collections, decimal, gzip, json, sys, os

def ns(v):  # exact µs -> ns, half away from zero
    return int((decimal.Decimal(v) * 1000).to_integral_value(rounding=decimal.ROUND_HALF_UP))

def union(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out

def total(u):
    return sum(e - s for s, e in u)

def intersect(a, b):
    i = j = t = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e: t += e - s
        if a[i][1] < b[j][1]: i += 1
        else: j += 1
    return t

def nccl(name):
    return name.startswith("ncclKernel_") or name.startswith("ncclDevKernel_")

for f in sorted(os.listdir(sys.argv[1])):
    if not f.endswith(".gz"): continue
    d = json.loads(gzip.open(os.path.join(sys.argv[1], f)).read(), parse_float=decimal.Decimal)
    print("==", f)
    if not isinstance(d, dict) or "traceEvents" not in d:
        print("no traceEvents (not a profiler trace)")
        continue
    ev = d["traceEvents"]
    print("events", len(ev))
    print("phases", dict(sorted(collections.Counter(e["ph"] for e in ev).items())))
    print("categories", dict(sorted(collections.Counter(e.get("cat", "") for e in ev).items())))
    tracks = {(type(e["pid"]).__name__, e["pid"], type(e["tid"]).__name__, e["tid"]) for e in ev if e["ph"] not in ("M", "t")}
    print("tracks", len(tracks))
    sl = [e for e in ev if e["ph"] in ("X", "i", "I")]
    print("slices", len(sl))
    print("first_ns", min(ns(e["ts"]) for e in sl), "last_ns", max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in sl))
    kern = [e for e in ev if e["ph"] == "X" and e.get("cat") == "kernel"]
    print("kernels", len(kern), "sum of their start ns % 1000", sum(ns(e["ts"]) % 1000 for e in kern))
    k = [e for e in ev if e["ph"] == "X" and e.get("cat") == "kernel" and nccl(e["name"])]
    print("nccl_kernels", len(k), dict(collections.Counter(e["args"].get("Collective name", "?") for e in k)))
    dtype_bytes = {"Float": 4, "Long": 8, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4}
    print("nccl_bytes", sum(max(e["args"].get("In msg nelems", 0), e["args"].get("Out msg nelems", 0))
                            * dtype_bytes.get(e["args"].get("dtype"), 0) for e in k),
          dict(collections.Counter(e["args"].get("dtype") for e in k)))
    s = {(e.get("cat"), e["id"]) for e in ev if e["ph"] == "s"}
    fl = {(e.get("cat"), e["id"]) for e in ev if e["ph"] == "f"}
    print("flows", len(s & fl))
    dev = [e for e in ev if e["ph"] == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    comp = union([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in dev if e["cat"] == "kernel" and not nccl(e["name"])])
    comm = union([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in dev if e["cat"] == "kernel" and nccl(e["name"])])
    busy = union([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in dev])
    if dev:
        span = busy[-1][1] - busy[0][0]
        print("per_rank compute_ns", total(comp), "comm_ns", total(comm), "idle_ns", span - total(busy),
              "overlap_ns", intersect(comp, comm))
