#!/usr/bin/env python3
"""GPT-1.3B (parallax's preset: 24 layers, hidden 2048, 16 heads, vocab 51200, seq 2048, GELU,
LayerNorm with bias, tied embeddings, learned positions) trained by PyTorch on one GPU, for the
side-by-side comparison with `bench_cuda --benchmark_filter=Gpt13bTraining` (docs/cuda.md).

Same recipe as parallax's bf16 run: fp32 master weights with bf16 autocast (PyTorch's mixed
precision), AdamW (fused), global batch 8 sequences by gradient accumulation over micro-batches,
causal attention through F.scaled_dot_product_attention (FlashAttention-2 kernels on sm80+).
Prints one JSON line: tokens/s, MFU (PaLM's model FLOPs per token over the bf16 dense peak of the
device, the same figures bench_cuda uses) and peak memory (torch.cuda.max_memory_allocated).
--recompute full checkpoints every block (torch.utils.checkpoint, non-reentrant); --profile FILE
runs the timed steps' first --profile-steps under torch.profiler (CPU and CUDA activities, shapes,
modules; a schedule, so each step is a ProfilerStep#N range) and writes their Kineto trace, which
`parallax refine --implementation pytorch` reads (scripts/pytorch_gpu_proof.sh); the profiled steps
are left out of the step time.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

# bf16 dense peak TFLOP/s, NVIDIA datasheets (the device presets of model/presets.cpp).
PEAK_BF16 = {"H200": 989.4, "H100": 989.4, "A100": 312.0}


class Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, 4 * h)
        self.fc2 = nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        shape = (b, s, self.heads, h // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, h, heads, vocab, seq, recompute=False):
        super().__init__()
        self.recompute = recompute
        self.wte = nn.Embedding(vocab, h)
        self.wpe = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(h)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = checkpoint.checkpoint(blk, x, use_reentrant=False) if self.recompute else blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied LM head
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def model_flops_per_token(layers, h, vocab, seq):
    # 6N + 12 L h s (PaLM appendix B), N without the embeddings' lookup cost but with the LM head.
    n = layers * (12 * h * h + 13 * h) + vocab * h
    return 6 * n + 12 * layers * h * seq


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--recompute", choices=["none", "full"], default="none")
    ap.add_argument("--profile", default="", help="write a torch.profiler trace of the first profiled steps here")
    ap.add_argument("--profile-steps", type=int, default=3)
    a = ap.parse_args()
    layers, h, heads, vocab, seq = 24, 2048, 16, 51200, 2048
    torch.manual_seed(7)
    dev = torch.device("cuda")
    model = Gpt(layers, h, heads, vocab, seq, a.recompute == "full").to(dev)
    run = torch.compile(model) if a.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    accum = a.global_batch // a.micro_batch

    def step():
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(accum):
            idx = torch.randint(0, vocab, (a.micro_batch, seq), device=dev)
            tgt = torch.randint(0, vocab, (a.micro_batch, seq), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = run(idx, tgt) / accum
            loss.backward()
            total += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return total

    for _ in range(2):
        step()
    if a.profile:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        sched = torch.profiler.schedule(wait=0, warmup=0, active=a.profile_steps, repeat=1)
        with torch.profiler.profile(activities=acts, record_shapes=True, with_modules=True, schedule=sched,
                                    on_trace_ready=lambda p: p.export_chrome_trace(a.profile)) as prof:
            for _ in range(a.profile_steps):
                step()
                torch.cuda.synchronize()
                prof.step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    step_s = (time.perf_counter() - t0) / a.steps
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAK_BF16.items() if k in name), 0.0)
    tokens_per_s = a.global_batch * seq / step_s
    mfu = model_flops_per_token(layers, h, vocab, seq) * tokens_per_s / (peak * 1e12) if peak else 0.0
    print(json.dumps({"impl": "pytorch" + ("+compile" if a.compile else ""), "torch": torch.__version__, "gpu": name,
                      "micro_batch": a.micro_batch, "recompute": a.recompute, "step_s": round(step_s, 4), "tokens_per_s": round(tokens_per_s, 1),
                      "mfu": round(mfu, 4), "peak_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                      "loss": round(float(loss) * 1.0, 4)}))


if __name__ == "__main__":
    main()
