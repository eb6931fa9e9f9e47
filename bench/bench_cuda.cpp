// CUDA backend benchmarks (label gpu; need an NVIDIA GPU, docs/cuda.md):
//  - GEMM through the backend (GemmArgs, cached cuBLASLt plan, workspace from the allocator) over
//    cuBLASLt called directly with its top heuristic (ratio; aim >= 0.95), bf16 with fp32
//    accumulation, on the GEMM shapes of a GPT-1.3B layer (tokens 2048 x hidden 2048);
//  - causal attention forward + backward TFLOP/s, FLOPs counted as FlashAttention-2's benchmark
//    script does (Dao 2023, benchmarks/benchmark_flash_attention.py: forward 4 b s^2 h d / 2 for
//    causal, backward 2.5 x forward);
//  - GPT-1.3B single-GPU bf16 training at seq 2048: tokens/s, MFU (model FLOPs per token from
//    model/counting.h without recompute, PaLM's definition (Chowdhery et al. 2022, appendix B), over
//    the bf16 dense peak of the device preset matching the GPU's name) and peak memory against the
//    planner's estimate. bench/gpu/torch_gpt13b.py trains the same model with PyTorch;
//    bench/gpu/side_by_side.sh runs both.
// Times come from CUDA events on the compute stream (manual time).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/cuda_baseline.h"
#include "executor/backend_registry.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/launch.h"
#include "executor/runtime/trainer.h"
#include "model/counting.h"
#include "model/presets.h"
#include "planner/memory/memory_model.h"

namespace parallax::executor {
namespace {

CudaBackend* Cuda(Backend& b) { return dynamic_cast<CudaBackend*>(&b); }

std::unique_ptr<Backend> NewBackend(benchmark::State& state) {
  auto b = CreateBackend("cuda");
  if (!b) {
    state.SkipWithError(b.error().message.c_str());
    return nullptr;
  }
  return std::move(b).value();
}

void GemmBackendOverLt(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  auto be = NewBackend(state);
  if (!be) return;
  CudaBackend& cb = *Cuda(*be);
  auto x = be->AllocateZeroed(m * k, DType::kBf16, MemoryKind::kActivations);
  auto w = be->AllocateZeroed(n * k, DType::kBf16, MemoryKind::kWeights);
  auto y = be->Allocate(m * n, DType::kBf16, MemoryKind::kActivations);
  if (!x || !w || !y) return state.SkipWithError("allocation failed");
  be->Fill(x->ptr(), m * k, 0.01f);
  be->Fill(w->ptr(), n * k, 0.02f);
  GemmArgs g;
  g.tb = Trans::kYes;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = x->ptr();
  g.lda = k;
  g.b = w->ptr();
  g.ldb = k;
  g.c = y->ptr();
  g.ldc = n;
  DirectLt direct(m, n, k);
  if (!direct.ok) return state.SkipWithError("cuBLASLt has no algorithm for this shape");
  const cudaStream_t s = cb.raw_stream(StreamKind::kCompute);
  be->Gemm(g);  // plan once
  direct.Run(x->ptr().ptr, w->ptr().ptr, y->ptr().ptr, s);
  double ms_backend = 0, ms_direct = 0;
  for (auto _ : state) {
    const double a = TimeMs(s, 20, [&] { be->Gemm(g); });
    const double b = TimeMs(s, 20, [&] { direct.Run(x->ptr().ptr, w->ptr().ptr, y->ptr().ptr, s); });
    ms_backend += a;
    ms_direct += b;
    state.SetIterationTime(a * 1e-3);
  }
  if (Status st = be->Synchronize(); !st) return state.SkipWithError(st.error().message.c_str());
  const double flops = 2.0 * static_cast<double>(m * n * k);
  state.counters["backend_TFLOPs"] = flops / (ms_backend / static_cast<double>(state.iterations()) * 1e-3) / 1e12;
  state.counters["direct_TFLOPs"] = flops / (ms_direct / static_cast<double>(state.iterations()) * 1e-3) / 1e12;
  state.counters["ratio"] = ms_direct / ms_backend;
}
// GPT-1.3B layer at 2048 tokens: QKV, attention out, MLP up, MLP down (m = tokens, n = out, k = in).
BENCHMARK(GemmBackendOverLt)
    ->Args({2048, 6144, 2048})
    ->Args({2048, 2048, 2048})
    ->Args({2048, 8192, 2048})
    ->Args({2048, 2048, 8192})
    ->Args({8192, 8192, 8192})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void AttentionForwardBackward(benchmark::State& state) {
  const AttentionShape s{state.range(0), state.range(1), state.range(2), state.range(2), state.range(3)};
  auto be = NewBackend(state);
  if (!be) return;
  const int64_t rows = s.seq * s.batch, qn = rows * s.heads * s.head_dim;
  auto q = be->Allocate(qn, DType::kBf16, MemoryKind::kActivations);
  auto o = be->Allocate(qn, DType::kBf16, MemoryKind::kActivations);
  auto dq = be->Allocate(qn, DType::kBf16, MemoryKind::kActivations);
  auto dk = be->Allocate(qn, DType::kBf16, MemoryKind::kActivations);
  auto dv = be->Allocate(qn, DType::kBf16, MemoryKind::kActivations);
  auto lse = be->Allocate(s.stats_floats(), DType::kF32, MemoryKind::kActivations);
  if (!q || !o || !dq || !dk || !dv || !lse) return state.SkipWithError("allocation failed");
  be->Fill(q->ptr(), qn, 0.05f);
  be->Fill(o->ptr(), qn, 0.01f);
  const cudaStream_t st = Cuda(*be)->raw_stream(StreamKind::kCompute);
  double fwd_ms = 0, bwd_ms = 0;
  for (auto _ : state) {
    const double f = TimeMs(st, 3, [&] {
      be->AttentionForward(
          {.shape = s, .q = q->ptr(), .k = q->ptr(), .v = q->ptr(), .out = o->ptr(), .lse = lse->ptr()});
    });
    const double b = TimeMs(st, 3, [&] {
      be->AttentionBackward({.shape = s, .q = q->ptr(), .k = q->ptr(), .v = q->ptr(), .out = o->ptr(),
                             .lse = lse->ptr(), .dout = o->ptr(), .dq = dq->ptr(), .dk = dk->ptr(), .dv = dv->ptr()});
    });
    fwd_ms += f;
    bwd_ms += b;
    state.SetIterationTime((f + b) * 1e-3);
  }
  if (Status e = be->Synchronize(); !e) return state.SkipWithError(e.error().message.c_str());
  const double it = static_cast<double>(state.iterations());
  const double fwd_flops = 4.0 * static_cast<double>(s.batch * s.seq * s.seq * s.heads * s.head_dim) / 2.0;
  state.counters["fwd_TFLOPs"] = fwd_flops / (fwd_ms / it * 1e-3) / 1e12;
  state.counters["bwd_TFLOPs"] = 2.5 * fwd_flops / (bwd_ms / it * 1e-3) / 1e12;
  state.counters["fwd_bwd_TFLOPs"] = 3.5 * fwd_flops / ((fwd_ms + bwd_ms) / it * 1e-3) / 1e12;
}
// (batch, seq, heads, head_dim): GPT-1.3B (16 x 128) and a 64-wide head.
BENCHMARK(AttentionForwardBackward)
    ->Args({1, 2048, 16, 128})
    ->Args({4, 2048, 16, 128})
    ->Args({2, 4096, 32, 64})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// A weight-gradient GEMM C[m,n] (+)= A B with m = output features, n = input features, k = tokens,
// three ways, to tell apart what makes the accumulating weight gradient slower than a plain GEMM of
// the same work (1.11-1.29x on an H200 at k = 2048, data/calibration/h200-2026-11-26; the planner's
// Hopper accumulate_epilogue_fraction prices it as C traffic, whose share falls as 1/k):
//   mode 0: the forward layout, C = A B^T (A: m x k, B: n x k), bf16 C written (beta 0);
//   mode 1: the weight-gradient layout, C = A^T B (A: k x m, B: k x n), bf16 C written (beta 0);
//   mode 2: mode 1 accumulating into fp32 C (beta 1), as LinearBackward and Megatron-Core run it.
// mode 2 / mode 1 over k is the epilogue; mode 1 / mode 0 the operand layout.
void WeightGradientGemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2), mode = state.range(3);
  auto be = NewBackend(state);
  if (!be) return;
  CudaBackend& cb = *Cuda(*be);
  auto a = be->AllocateZeroed(m * k, DType::kBf16, MemoryKind::kActivations);
  auto b = be->AllocateZeroed(n * k, DType::kBf16, MemoryKind::kActivations);
  auto c = be->AllocateZeroed(m * n, mode == 2 ? DType::kF32 : DType::kBf16, MemoryKind::kGradients);
  if (!a || !b || !c) return state.SkipWithError("allocation failed");
  be->Fill(a->ptr(), m * k, 0.01f);
  be->Fill(b->ptr(), n * k, 0.02f);
  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a->ptr();
  g.b = b->ptr();
  g.c = c->ptr();
  g.ldc = n;
  if (mode == 0) {
    g.tb = Trans::kYes;
    g.lda = k;
    g.ldb = k;
  } else {
    g.ta = Trans::kYes;
    g.lda = m;
    g.ldb = n;
    g.beta = mode == 2 ? 1.0f : 0.0f;
  }
  const cudaStream_t s = cb.raw_stream(StreamKind::kCompute);
  be->Gemm(g);  // plan once
  double ms = 0;
  for (auto _ : state) {
    const double t = TimeMs(s, 20, [&] { be->Gemm(g); });
    ms += t;
    state.SetIterationTime(t * 1e-3);
  }
  if (Status st = be->Synchronize(); !st) return state.SkipWithError(st.error().message.c_str());
  state.counters["TFLOPs"] = 2.0 * static_cast<double>(m * n * k) / (ms / static_cast<double>(state.iterations()) * 1e-3) / 1e12;
}
// GPT-1.3B's fc1 weight (8192 x 2048) at 2048-16384 tokens, and its LM head (51200 x 2048).
BENCHMARK(WeightGradientGemm)
    ->ArgsProduct({{8192}, {2048}, {2048, 4096, 8192, 16384}, {0, 1, 2}})
    ->ArgsProduct({{51200}, {2048}, {2048}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Peak bf16 dense TFLOP/s of the preset device whose name matches the GPU (0 if none does).
double PeakBf16Tflops(const std::string& gpu) {
  const char* preset = gpu.find("H200") != std::string::npos   ? "h200-sxm-141g"
                       : gpu.find("H100") != std::string::npos ? "h100-sxm-80g"
                       : gpu.find("A100") != std::string::npos ? "a100-sxm-80g"
                                                               : nullptr;
  if (preset == nullptr) return 0;
  auto d = DevicePreset(preset);
  return d ? d->peak_tflops.bf16 : 0;
}

void Gpt13bTraining(benchmark::State& state) {
  const int64_t micro_batch = state.range(0);
  const bool selective = state.range(1) != 0;
  auto be = NewBackend(state);
  if (!be) return;
  auto launch = InitLaunch(nullptr, nullptr);
  auto world = be->ConnectWorld(*launch, 300);
  if (!world) return state.SkipWithError(world.error().message.c_str());
  Plan plan;
  plan.model = *ModelPreset("gpt-1.3b");
  plan.cluster = *ClusterPreset("dgx-h100");
  plan.cluster.nodes = 1;
  plan.cluster.gpus_per_node = 1;
  auto l = ParseInlineLayout("micro_batch=" + std::to_string(micro_batch) +
                             (selective ? ",recompute=selective" : ",recompute=none"));
  if (!l) return state.SkipWithError(l.error().message.c_str());
  plan.layout = *l;
  plan.layout.global_batch = 8;
  plan.training.global_batch = 8;
  plan.training.precision = Precision::kBf16;
  auto t = Trainer::Create(plan, *be, **world, TrainerOptions{});
  if (!t) return state.SkipWithError(t.error().message.c_str());
  for (int i = 0; i < 2; ++i) {  // warm-up: plans, caches, first-touch allocations
    auto r = (*t)->Step();
    if (!r) return state.SkipWithError(r.error().message.c_str());
  }
  be->ResetPeak();
  const char* steps_env = std::getenv("PARALLAX_BENCH_STEPS");
  const int steps = steps_env != nullptr ? std::atoi(steps_env) : 10;
  double total_s = 0;
  double last_loss = 0;
  for (auto _ : state) {
    for (int i = 0; i < steps; ++i) {
      auto r = (*t)->Step();
      if (!r) return state.SkipWithError(r.error().message.c_str());
      total_s += r->step_time_s;
      last_loss = r->loss;
      state.SetIterationTime(r->step_time_s);
    }
  }
  const double step_s = total_s / (static_cast<double>(state.iterations()) * steps);
  const double tokens = static_cast<double>(plan.training.global_batch * plan.model.seq_len);
  const double tokens_per_s = tokens / step_s;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, Cuda(*be)->device());
  const double peak = PeakBf16Tflops(prop.name);
  const double model_flops = TrainingFlopsPerToken(plan.model, plan.model.seq_len, Recompute::kNone);
  const double mfu = peak > 0 ? model_flops * tokens_per_s / (peak * 1e12) : 0;
  const int64_t predicted = planner::PeakMemoryBytes(plan);
  state.counters["tokens_per_s"] = tokens_per_s;
  state.counters["MFU"] = mfu;
  state.counters["step_s"] = step_s;
  state.counters["peak_GiB"] = static_cast<double>(be->memory().peak_bytes) / (1 << 30);
  state.counters["reserved_GiB"] = static_cast<double>(be->memory().peak_reserved_bytes) / (1 << 30);
  state.counters["planner_GiB"] = static_cast<double>(predicted) / (1 << 30);
  std::printf(
      "{\"impl\": \"parallax\", \"gpu\": \"%s\", \"micro_batch\": %lld, \"recompute\": \"%s\", \"step_s\": %.4f, "
      "\"tokens_per_s\": %.1f, \"mfu\": %.4f, \"peak_GiB\": %.2f, \"planner_GiB\": %.2f, \"loss\": %.4f}\n",
      prop.name, static_cast<long long>(micro_batch), selective ? "selective" : "none", step_s, tokens_per_s, mfu,
      static_cast<double>(be->memory().peak_bytes) / (1 << 30), static_cast<double>(predicted) / (1 << 30), last_loss);
}
// (micro_batch, selective recompute): global batch 8 sequences of 2048 tokens per step.
BENCHMARK(Gpt13bTraining)->Args({1, 0})->Args({2, 0})->Args({4, 1})->Iterations(1)->UseManualTime()->Unit(
    benchmark::kSecond);

}  // namespace
}  // namespace parallax::executor
