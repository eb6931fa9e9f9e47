#!/usr/bin/env python3
"""The all-reduce torch.distributed runs for DDP on the CPU (the gloo backend), timed the way
nccl-tests' all_reduce_perf times NCCL's, and printed in its output format, so that
`parallax calibrate --import-nccl-tests` reads it as a measured curve of the framework's own
collective (issue 40: the peer's DDP = 2 runs reduce their gradients over gloo, not over our MPI).

For each size (float32, powers of two from --min-bytes to --max-bytes): --warmup untimed calls, then
--iters calls, each after a barrier; time = the slowest rank's median call (nccl-tests prints
a mean of calls back to back; a median keeps a preempted call on a shared machine out). Out-of-place is torch.distributed.all_reduce of a copy
(the copy is not timed), in-place the call itself (DDP reduces its buckets in place). Each process
runs one thread (as the peer's processes do). Rank lines name the device "cpu".

  python3 bench/peer/gloo_all_reduce.py --world 2 > gloo_all_reduce_perf.txt
"""
import argparse
import os
import socket
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import torch  # noqa: E402  (after the thread variables)
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def timed(fn, iters):
    """The median of `iters` calls, each timed alone after a barrier, on the slowest rank (a median,
    not nccl-tests' mean: on a shared machine a preempted call would move a mean of few calls)."""
    times = []
    for _ in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    slowest = torch.tensor([times[len(times) // 2]], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.item()


def run(rank, world, args):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    names = [None] * world
    dist.all_gather_object(names, (rank, socket.gethostname(), os.getpid()))
    if rank == 0:
        print(f"# nThread 1 nGpus 1 minBytes {args.min_bytes} maxBytes {args.max_bytes} step: 2(factor) "
              f"warmup iters: {args.warmup} iters: {args.iters} agg iters: 1 validation: 0 graph: 0")
        print("#\n# Using devices")
        for r, host, pid in names:
            print(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10s} device  0 [0x00] cpu")
        print("#\n#{:>64s}{:>35s}".format("out-of-place", "in-place"))
        print("#       size         count      type   redop    root     time   algbw   busbw #wrong"
              "     time   algbw   busbw #wrong")
        print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "            (us)  (GB/s)  (GB/s)")
    size = args.min_bytes
    factor = 2.0 * (world - 1) / world
    while size <= args.max_bytes:
        count = max(1, size // 4)
        x = torch.ones(count, dtype=torch.float32)
        y = torch.empty_like(x)
        iters = max(3, min(args.iters, int(args.budget_bytes // max(size, 1))))
        for _ in range(args.warmup):
            dist.all_reduce(x)
        cols = []
        for in_place in (False, True):
            def call():
                if in_place:
                    dist.all_reduce(x)
                else:
                    y.copy_(x)
                    dist.all_reduce(y)
            t = timed(call, iters)
            if not in_place:
                # The copy is not the collective's: time it alone and take it out.
                t -= timed(lambda: y.copy_(x), iters)
            t = max(t, 1e-9)
            algbw = count * 4 / t / 1e9
            cols.append(f"{t * 1e6:8.1f} {algbw:7.2f} {algbw * factor:7.2f}      0")
        if rank == 0:
            print(f"{count * 4:12d}  {count:12d}     float     sum      -1 {cols[0]} {cols[1]}")
            sys.stdout.flush()
        size *= 2
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--min-bytes", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--budget-bytes", type=float, default=512e6, help="fewer iterations for large sizes")
    ap.add_argument("--port", type=int, default=29547)
    args = ap.parse_args()
    mp.spawn(run, args=(args.world, args), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
