// Executor benchmarks (issue 5 item 8):
//  - GEMM GFLOP/s of the CPU backend against OpenBLAS's cblas_sgemm called directly (ratio, aim >= 0.95)
//  - runtime overhead per training step over the sum of its kernels on a 256-hidden model (aim < 10%)
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <random>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "executor/launch.h"
#include "executor/runtime/trainer.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

double Seconds(const std::chrono::steady_clock::time_point& a, const std::chrono::steady_clock::time_point& b) {
  return std::chrono::duration<double>(b - a).count();
}

// The shapes a 256-hidden layer runs (tokens x out x in) plus square ones.
void GemmRatio(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k)), c(static_cast<size_t>(m * n));
  for (auto& x : a) x = d(rng);
  for (auto& x : b) x = d(rng);
  CpuBackend be;
  // Through the seam: typed tensors in backend memory, GemmArgs, as the runtime's linears call it.
  auto ta = be.Allocate(m * k, DType::kF32, MemoryKind::kWorkspace), tb = be.Allocate(n * k, DType::kF32, MemoryKind::kWorkspace);
  auto tc = be.Allocate(m * n, DType::kF32, MemoryKind::kWorkspace);
  if (!ta || !tb || !tc) {
    state.SkipWithError("allocation failed");
    return;
  }
  be.CopyToDevice(ta->ptr(), a.data(), DType::kF32, m * k);
  be.CopyToDevice(tb->ptr(), b.data(), DType::kF32, n * k);
  GemmArgs g;
  g.tb = Trans::kYes;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = ta->ptr();
  g.lda = k;
  g.b = tb->ptr();
  g.ldb = k;
  g.c = tc->ptr();
  g.ldc = n;
  double t_backend = 0, t_blas = 0;
  int64_t reps = 0;
  for (auto _ : state) {
    // Interleaved so both see the same machine state; y = x W^T as the linears call it.
    auto t0 = std::chrono::steady_clock::now();
    be.Gemm(g);
    auto t1 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), 1.0f, a.data(), static_cast<blasint>(k), b.data(), static_cast<blasint>(k),
                0.0f, c.data(), static_cast<blasint>(n));
    auto t2 = std::chrono::steady_clock::now();
    t_backend += Seconds(t0, t1);
    t_blas += Seconds(t1, t2);
    ++reps;
    benchmark::DoNotOptimize(c.data());
  }
  const double flops = 2.0 * static_cast<double>(m * n * k) * static_cast<double>(reps);
  state.counters["backend_GFLOPs"] = flops / t_backend * 1e-9;
  state.counters["cblas_GFLOPs"] = flops / t_blas * 1e-9;
  state.counters["ratio"] = t_blas / t_backend;
}
BENCHMARK(GemmRatio)
    ->Args({512, 768, 256})
    ->Args({512, 256, 1024})
    ->Args({512, 1024, 256})
    ->Args({512, 512, 512})
    ->Args({1024, 1024, 1024})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Idle time between ops: one training step's wall time against the sum of the op times its
// recorder measured (what the runtime adds: copies, allocation, bookkeeping, waits). Arg 0: the
// peer model (4 layers x 256, seq 128, micro-batch 8, as scripts/bench_peer.sh); 1 and 2: a
// 6-layer 256-hidden GPT (micro-batch 4) with recompute none / full. One process, fp32.
void StepOverhead(benchmark::State& state) {
  Plan p = state.range(0) == 0 ? testing::WidePlan("micro_batch=8", 8)
                               : testing::WidePlan(std::string("micro_batch=4,recompute=") +
                                                       (state.range(0) == 2 ? "full" : "none"),
                                                   8);
  if (state.range(0) == 0) {
    p.model.name = "gpt-peer-4x256";
    p.model.layers = 4;
  }
  CpuBackend be;
  auto world = LocalCommunicator();
  TrainerOptions o;
  o.record_ops = true;
  auto t = Trainer::Create(p, be, *world, o);
  if (!t) {
    state.SkipWithError(t.error().message.c_str());
    return;
  }
  (void)(*t)->Step();  // warm-up (fills the allocator's cache)
  double step_s = 0, kernel_s = 0;
  for (auto _ : state) {
    (*t)->recorder().Clear();
    auto r = (*t)->Step();
    step_s += r->step_time_s;
    kernel_s += (*t)->recorder().ComputeSeconds(r->step);
  }
  state.SetLabel(p.model.name);
  state.counters["step_ms"] = step_s / static_cast<double>(state.iterations()) * 1e3;
  state.counters["ops_ms"] = kernel_s / static_cast<double>(state.iterations()) * 1e3;
  state.counters["idle_pct"] = (1.0 - kernel_s / step_s) * 100.0;
}
BENCHMARK(StepOverhead)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

}  // namespace
}  // namespace parallax::executor
