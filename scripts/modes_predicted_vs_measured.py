#!/usr/bin/env python3
"""Predicted against measured step time of the classic modes on this machine's CPU executor
(issue 41 item 6; docs/classic_modes.md "Predicted against measured").

For each worker count, without and then with one injected straggler, runs
`parallax compare-modes --calibrate`: for each mode it calibrates the CPU backend (quick) with as
many ranks as the mode's job has, just before its runs, predicts the step from those costs and
measures the median step (model/step_time.h). With --repeats N each setting runs N times (each a
fresh calibration and fresh jobs): the table shows the median of the N predictions and of the N
measured medians, and the measured spread (lowest and highest of the N, against their median), the
machine's own run-to-run noise. Prints one markdown table per setting with the machine's load
average before and after (the machine is shared: quote the load with the table). Predictions are
never fitted to the measurements.

  scripts/modes_predicted_vs_measured.py --parallax build/cli/parallax --workers 2,3,4 \
      --slow rank=1,factor=3 --steps 20 --work-dir out
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess

MODES = ["allreduce", "sync=ps,servers=1", "sync=ps,servers=colocated:1", "sync=async,servers=colocated:1",
         "sync=ssp:1,servers=colocated:1", "sync=backup:1", "sync=local:4", "compression=bf16",
         "compression=int8", "compression=topk:0.1", "compression=powersgd:4"]


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parallax", default="build/cli/parallax")
    ap.add_argument("--model", default="gpt-tiny")
    ap.add_argument("--global-batch", type=int, default=12)  # divisible by 2, 3 and 4 workers
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workers", default="2,3,4")
    ap.add_argument("--slow", default="rank=1,factor=3", help="rank=R,factor=F (empty: no straggler rows)")
    ap.add_argument("--modes", default=";".join(MODES))
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--repeats", type=int, default=1, help="runs of each setting (medians reported)")
    ap.add_argument("--work-dir", default="modes_pvm")
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    within = total = 0
    for slow in [""] + ([a.slow] if a.slow else []):
        print(f"\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {a.model}, global batch "
              f"{a.global_batch}, {a.steps} steps, straggler: {slow or 'none'}; load average before: {load()}")
        print("| workers | mode | ranks | predicted ms | measured ms | error | measured spread |\n"
              "|---:|---|---:|---:|---:|---:|---:|")
        for w in a.workers.split(","):
            runs = []
            for r in range(a.repeats):
                out = os.path.join(a.work_dir, f"w{w}_{'slow' if slow else 'even'}" + (f"_{r}" if a.repeats > 1 else ""))
                cmd = [a.parallax, "compare-modes", "--calibrate", "--model", a.model, "--workers", w, "--global-batch",
                       str(a.global_batch), "--steps", str(a.steps), "--modes", a.modes, "-o", out]
                subprocess.run(cmd + (["--inject-slow", slow] if slow else []), check=True, stdout=subprocess.DEVNULL)
                runs.append(json.load(open(out + ".json"))["modes"])
            for i, m in enumerate(runs[0]):
                p = statistics.median(run[i]["predicted_step_s"] for run in runs)
                qs = [run[i]["measured_step_s"] for run in runs]
                q = statistics.median(qs)
                err = p / q - 1
                within += abs(err) <= a.tolerance
                total += 1
                spread = f"{100*(min(qs)/q-1):+.0f}% / {100*(max(qs)/q-1):+.0f}%" if len(qs) > 1 else "-"
                print(f"| {w} | {m['mode']} | {m['ranks']} | {p*1e3:.2f} | {q*1e3:.2f} | {100*err:+.1f}%"
                      f"{'' if abs(err) <= a.tolerance else ' (over)'} | {spread} |", flush=True)
        print(f"load average after: {load()}")
    print(f"\n{within}/{total} within {100*a.tolerance:.0f}%")


if __name__ == "__main__":
    main()
