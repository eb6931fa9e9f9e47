#!/usr/bin/env python3
"""Table of the peer benchmark (scripts/bench_peer.sh): median step time of each side after the
warm-up steps, the speedup (PyTorch time / parallax time; > 1 means parallax is faster) and the largest
relative difference between the two loss curves (same weights, data and optimizer: they must agree)."""
import argparse
import json
import statistics

WARMUP = 2  # steps dropped from each run (first-touch of buffers, thread pools)
LABELS = {"1thread": "1 thread, 1 process", "dp2": "DP=2 (MPI vs DDP/gloo), 1 thread each",
          "allcores": "all cores, 1 process"}


def load(path):
    with open(path) as f:
        return json.load(f)


def cpu_seconds(path):
    ticks, hz = open(path).read().split()
    return int(ticks) / int(hz)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for case in a.cases.split(","):
        side = {}
        loss_diff = 0.0
        for name in ("parallax", "torch"):
            times = []
            for r in range(a.repeats):
                d = load(f"{a.dir}/{case}.{name}.{r}.json")
                times += d["step_times_s"][WARMUP:]
                side.setdefault(name + "_losses", d["losses"])
            side[name] = statistics.median(times)
            # CPU time per step: (a full run - the 2-step run) / (steps - 2), median over repeats.
            short = cpu_seconds(f"{a.dir}/{case}.{name}.short.json.cpu")
            per_step = [(cpu_seconds(f"{a.dir}/{case}.{name}.{r}.json.cpu") - short) / (a.steps - 2)
                        for r in range(a.repeats)]
            side[name + "_cpu"] = statistics.median(per_step)
        for lp, lt in zip(side["parallax_losses"], side["torch_losses"]):
            loss_diff = max(loss_diff, abs(lp - lt) / abs(lt))
        rows.append({"case": case, "parallax_ms": side["parallax"] * 1e3, "pytorch_ms": side["torch"] * 1e3,
                     "speedup": side["torch"] / side["parallax"],
                     "parallax_cpu_ms": side["parallax_cpu"] * 1e3, "pytorch_cpu_ms": side["torch_cpu"] * 1e3,
                     "cpu_speedup": side["torch_cpu"] / side["parallax_cpu"], "max_loss_rel_diff": loss_diff})
    print(f"{'case':40s} {'parallax ms':>12s} {'PyTorch ms':>11s} {'speedup':>8s} {'| CPU ms/step:':>14s} "
          f"{'parallax':>9s} {'PyTorch':>8s} {'ratio':>6s} {'loss rel diff':>14s}")
    for r in rows:
        label = LABELS[r["case"]] + (f" ({a.threads})" if r["case"] == "allcores" else "")
        print(f"{label:40s} {r['parallax_ms']:12.1f} {r['pytorch_ms']:11.1f} {r['speedup']:7.2f}x {'':14s} "
              f"{r['parallax_cpu_ms']:9.1f} {r['pytorch_cpu_ms']:8.1f} {r['cpu_speedup']:5.2f}x "
              f"{r['max_loss_rel_diff']:14.2e}")
    print("speedup = PyTorch step time / parallax step time (median over steps after the first "
          f"{WARMUP}); goal >= 1.5x. CPU ms/step: user + system time of all processes per step "
          "(all ranks or threads together; MPI's and OpenMP's busy waits count).")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "threads": a.threads}, f, indent=1)


if __name__ == "__main__":
    main()
