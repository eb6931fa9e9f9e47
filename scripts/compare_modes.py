#!/usr/bin/env python3
"""Runs classic modes on the same model and data and compares them (issue 41 items 5 and 6, as a
script until `parallax compare-modes` exists): loss against step and against wall clock per mode,
and each mode's predicted step time (`parallax simulate`) beside the measured median.

  scripts/compare_modes.py --parallax build/cli/parallax --workers 4 --slow rank=1,factor=3 \
      --modes "allreduce;sync=backup:1;sync=async,servers=colocated:1;compression=topk:0.1" -o out

writes out.json and out.csv (mode, step, loss, wall_clock_s). Runs under mpirun on this machine.
"""
import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile


def cluster_json(parallax, ranks, slow):
    shown = json.loads(subprocess.check_output([parallax, "cluster", "show", "local-cpu", "--json"]))
    c = {k: shown[k] for k in ("kind", "version", "name", "device", "intra_node", "inter_node")}
    c.update(nodes=1, gpus_per_node=ranks)
    if slow:
        rank, factor = (float(kv.split("=")[1]) for kv in slow.split(","))
        c["stragglers"] = {"ranks": [{"rank": int(rank), "slowdown": factor}]}
    return c


def dedicated_servers(mode):
    for kv in mode.split(","):
        if kv.startswith("servers=") and not kv.startswith("servers=colocated"):
            return int(kv.split("=")[1].split(":")[-1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parallax", default="build/cli/parallax")
    ap.add_argument("--model", default="gpt-tiny")
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slow", default="", help="rank=R,factor=F")
    ap.add_argument("--modes", default="allreduce;sync=backup:1;sync=async,servers=colocated:1;compression=topk:0.1")
    ap.add_argument("-o", "--output", default="compare_modes")
    a = ap.parse_args()
    out = {"model": a.model, "global_batch": a.global_batch, "workers": a.workers, "slow": a.slow, "modes": []}
    rows = []
    for mode in a.modes.split(";"):
        layout = f"dp={a.workers},global_batch={a.global_batch}" + ("" if mode == "allreduce" else "," + mode)
        ranks = a.workers + dedicated_servers(mode)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(cluster_json(a.parallax, ranks, a.slow), f)
            cluster = f.name
        sim = json.loads(subprocess.check_output(
            [a.parallax, "simulate", "--plan", layout, "--model", a.model, "--cluster", cluster, "--json"],
            stderr=subprocess.DEVNULL))
        predicted = sim.get("classic", {}).get("sync_mode", {}).get("step_time_s", sim["step_time_s"])
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(ranks), a.parallax, "run", "--plan",
               layout, "--model", a.model, "--cluster", cluster, "--steps", str(a.steps), "--json"]
        if a.slow:
            cmd += ["--inject-slow", a.slow]
        run = json.loads(subprocess.check_output(cmd, stderr=subprocess.DEVNULL))
        wall = run["classic"].get("wall_clock_s") or []
        if not wall:  # the all-reduce path: step times, back to back
            wall, t = [], 0.0
            for s in run["step_times_s"]:
                t += s
                wall.append(t)
        steps = [b - a_ for a_, b in zip(wall, wall[1:])]
        measured = statistics.median(steps) if steps else wall[0]
        out["modes"].append({"mode": mode, "layout": layout, "ranks": ranks, "predicted_step_s": predicted,
                             "measured_step_s": measured, "error": predicted / measured - 1,
                             "losses": run["losses"], "wall_clock_s": wall,
                             "staleness_histogram": run["classic"].get("staleness_histogram", [])})
        for i, (loss, t) in enumerate(zip(run["losses"], wall)):
            rows.append({"mode": mode, "step": i, "loss": loss, "wall_clock_s": t})
        print(f"{mode:40s} predicted {predicted*1e3:8.2f} ms  measured {measured*1e3:8.2f} ms  "
              f"error {100*(predicted/measured-1):+6.1f}%  loss {run['losses'][0]:.4f} -> {run['losses'][-1]:.4f}")
        sys.stdout.flush()
    with open(a.output + ".json", "w") as f:
        json.dump(out, f, indent=2)
    with open(a.output + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["mode", "step", "loss", "wall_clock_s"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
