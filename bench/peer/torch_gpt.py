#!/usr/bin/env python3
"""The peer of `parallax run` in PyTorch: the same GPT, data, initial weights, optimizer and precision.

Used by scripts/bench_peer.sh. Mirrors, one for one:
  - the model (executor/runtime/transformer_layer.cpp, embedding_head.cpp): pre-LayerNorm GPT-2 blocks
    with biases, learned positions, tied embeddings, causal softmax attention, GELU (tanh form), a final
    LayerNorm and a vocabulary head sharing the word embedding;
  - the initial weights (executor/runtime/param_init.cpp): element i of parameter NAME is
    N(0, std^2) sample i of the counter-based stream ParamKey(seed, NAME), so step 1's loss is the same;
  - the data (executor/runtime/data.cpp): the synthetic token stream, sample n a function of (seed, n);
    step s takes samples [s*B, (s+1)*B), DP replica d the d-th contiguous slice;
  - the optimizer (executor/runtime/optimizer.cpp): global-norm clipping, then AdamW with decoupled weight
    decay on the weights and embeddings only (biases and norm gains undecayed), fp32 throughout.
Prints one JSON object: losses and step_times_s (rank 0).
With --profile FILE, --profile-steps steps from --profile-step run under the PyTorch profiler (CPU
activities, shapes and modules where the build records them) and rank 0 writes their trace to FILE; their
times are profiled_step_times_s and they are left out of step_times_s. `parallax refine --implementation pytorch` reads it.
"""
import argparse
import json
import math
import os
import sys
import time



def _threads_before_torch(argv):
    """--threads must hold for every library torch calls: torch.set_num_threads sets ATen's and
    OpenMP's pools, but Debian's PyTorch (BLAS_INFO=generic) runs its GEMMs in the system BLAS
    (OpenBLAS), whose own thread pool is sized once, when the library loads, from
    OPENBLAS_NUM_THREADS or OMP_NUM_THREADS, else every core. Without them a "one-thread" process
    used both cores of a 2-core machine for its GEMMs (2026-11-28: 69 ms a step alone against 113 ms
    with the variables set; two such processes side by side 147-153 ms each), and DDP = 2 looked 2.1x
    slower than one process. So the variables are set here, before torch (and its BLAS) load."""
    threads = "1"
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            threads = argv[i + 1]
        elif a.startswith("--threads="):
            threads = a.split("=", 1)[1]
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = threads


_threads_before_torch(sys.argv[1:])

import numpy as np  # noqa: E402  (after the thread variables: numpy loads the BLAS too)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

MASK = (1 << 64) - 1


def splitmix64(x):
    """Vectorised splitmix64 on uint64 arrays (wrap-around arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def param_key(seed, name):
    h = 1469598103934665603
    for ch in name.encode():
        h ^= ch
        h = (h * 1099511628211) & MASK
    s = int(splitmix64(np.array([seed & MASK], dtype=np.uint64))[0])
    return int(splitmix64(np.array([h ^ s], dtype=np.uint64))[0])


def uniform_at(key, index):
    with np.errstate(over="ignore"):
        idx = index.astype(np.uint64) * np.uint64(0x632BE59BD9B4E019)
    r = splitmix64(np.uint64(key) ^ splitmix64(idx))
    return (r >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def normal_at(key, n, std):
    i = np.arange(n, dtype=np.int64)
    u1 = uniform_at(key, 2 * i) + 1e-300
    u2 = uniform_at(key, 2 * i + 1)
    return (std * np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)).astype(np.float32)


def synthetic_sample(key, index, seq, vocab):
    """seq+1 tokens of sample `index` (executor/runtime/data.cpp, SyntheticData::Sample)."""
    base = index * (seq + 3)
    start = int(uniform_at(key, np.array([base]))[0] * vocab)
    stride = 1 + int(uniform_at(key, np.array([base + 1]))[0] * 7.0)
    t = np.arange(seq + 1, dtype=np.int64)
    tok = (start + stride * t) % vocab
    noise = uniform_at(key, base + 2 + t) < 0.1
    repl = (uniform_at(key ^ 0x5BD1E995, base + t) * vocab).astype(np.int64)
    return np.where(noise, repl, tok)


class Block(torch.nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(h, eps=1e-5)
        self.wq = torch.nn.Linear(h, h)
        self.wk = torch.nn.Linear(h, h)
        self.wv = torch.nn.Linear(h, h)
        self.wo = torch.nn.Linear(h, h, bias=False)
        self.bo = torch.nn.Parameter(torch.zeros(h))
        self.ln2 = torch.nn.LayerNorm(h, eps=1e-5)
        self.fc1 = torch.nn.Linear(h, ffn)
        self.fc2 = torch.nn.Linear(ffn, h, bias=False)
        self.b2 = torch.nn.Parameter(torch.zeros(h))

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads
        a = self.ln1(x)
        q = self.wq(a).view(b, s, self.heads, d).transpose(1, 2)
        k = self.wk(a).view(b, s, self.heads, d).transpose(1, 2)
        v = self.wv(a).view(b, s, self.heads, d).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.wo(ctx) + self.bo
        m = F.gelu(self.fc1(self.ln2(x)), approximate="tanh")
        return x + self.fc2(m) + self.b2


class Gpt(torch.nn.Module):
    def __init__(self, spec):
        super().__init__()
        h, ffn = spec["hidden"], spec.get("ffn_hidden", 4 * spec["hidden"])
        self.words = torch.nn.Embedding(spec["vocab"], h)
        self.positions = torch.nn.Embedding(spec["seq_len"], h)
        self.blocks = torch.nn.ModuleList(Block(h, spec["heads"], ffn) for _ in range(spec["layers"]))
        self.final_norm = torch.nn.LayerNorm(h, eps=1e-5)
        s = spec["seq_len"]
        # A plain attribute, not a buffer: DDP would broadcast a buffer, and gloo has no bool type.
        self.mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)

    def forward(self, tokens):
        x = self.words(tokens) + self.positions.weight[: tokens.shape[1]]
        for blk in self.blocks:
            x = blk(x, self.mask)
        return self.final_norm(x) @ self.words.weight.t()


def init_like_parallax(model, spec, seed):
    """Weights exactly as executor/runtime/param_init.cpp draws them; returns (decayed, undecayed)."""
    std_out = 0.02 / math.sqrt(2.0 * spec["layers"])
    decay, no_decay = [], []

    def normal(p, name, std):
        with torch.no_grad():
            p.copy_(torch.from_numpy(normal_at(param_key(seed, name), p.numel(), std)).view_as(p))
        decay.append(p)

    normal(model.words.weight, "word_embedding", 0.02)
    normal(model.positions.weight, "position_embedding", 0.01)
    for i, blk in enumerate(model.blocks):
        pre = f"layer{i}."
        for lin in ("wq", "wk", "wv"):
            normal(getattr(blk, lin).weight, pre + lin, 0.02)
        normal(blk.wo.weight, pre + "wo", std_out)
        normal(blk.fc1.weight, pre + "fc1", 0.02)
        normal(blk.fc2.weight, pre + "fc2", std_out)
    decayed = {id(p) for p in decay}
    for p in model.parameters():
        if id(p) not in decayed:
            no_decay.append(p)
    with torch.no_grad():
        for mod in model.modules():  # biases start at zero and norm gains at one, as in parallax
            if isinstance(mod, torch.nn.Linear) and mod.bias is not None:
                mod.bias.zero_()
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.fill_(1.0)
                mod.bias.zero_()
    return decay, no_decay


def train(rank, world, args):
    torch.set_num_threads(args.threads)
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    with open(args.model) as f:
        spec = json.load(f)
    if args.seq_len:
        spec["seq_len"] = args.seq_len
    torch.manual_seed(args.seed)
    model = Gpt(spec)
    decay, no_decay = init_like_parallax(model, spec, args.seed)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    seq, vocab = spec["seq_len"], spec["vocab"]
    data_key = param_key(args.seed, "data")
    per_rank = args.global_batch // world
    losses, times = [], []
    profiled = []
    prof = None
    last_profiled = args.profile_step + args.profile_steps - 1
    for step in range(args.steps):
        in_profile = bool(args.profile) and args.profile_step <= step <= last_profiled
        if in_profile and step == args.profile_step:
            # A schedule of the profiled steps, as torch.profiler users record them: each step is a
            # "ProfilerStep#N" range (the profiler records those only under a schedule).
            prof = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, with_modules=True,
                schedule=torch.profiler.schedule(wait=0, warmup=0, active=args.profile_steps, repeat=1),
                on_trace_ready=(lambda p: p.export_chrome_trace(args.profile)) if rank == 0 else None)
            prof.__enter__()
        first = step * args.global_batch + rank * per_rank
        batch = np.stack([synthetic_sample(data_key, first + b, seq, vocab) for b in range(per_rank)])
        batch = torch.from_numpy(batch)
        t0 = time.perf_counter()
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        (profiled if in_profile else times).append(time.perf_counter() - t0)
        if in_profile:
            prof.step()  # the last profiled step's ends the schedule's window and writes the trace
        if in_profile and step == last_profiled:
            prof.__exit__(None, None, None)
        lv = loss.detach().clone()
        if world > 1:
            dist.all_reduce(lv)
            lv /= world
        losses.append(float(lv))
    if rank == 0:
        print(json.dumps({"losses": losses, "step_times_s": times, "world_size": world, "threads": args.threads,
                          "torch": torch.__version__, "profiled_step_times_s": profiled}))
        sys.stdout.flush()
    if world > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="parallax model JSON (gelu, layernorm, learned, tied, bias)")
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="threads per process, for ATen, OpenMP and the BLAS alike")
    ap.add_argument("--world", type=int, default=1, help="DDP processes over gloo")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--port", type=int, default=29533)
    ap.add_argument("--seq-len", type=int, default=0, help="sequence length (default: the model's)")
    ap.add_argument("--profile", default="", help="write a PyTorch profiler trace of one step here (rank 0)")
    ap.add_argument("--profile-step", type=int, default=2, help="the first step profiled (0-based)")
    ap.add_argument("--profile-steps", type=int, default=1, help="steps profiled")
    args = ap.parse_args()
    if args.world > 1:
        torch.multiprocessing.spawn(train, args=(args.world, args), nprocs=args.world, join=True)
    else:
        train(0, 1, args)


if __name__ == "__main__":
    main()
