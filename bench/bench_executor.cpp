// Executor benchmarks (issue 5 item 8):
//  - GEMM GFLOP/s of the CPU backend against OpenBLAS's cblas_sgemm called directly (ratio, aim >= 0.95)
//  - runtime overhead per training step over the sum of its kernels on a 256-hidden model (aim < 10%)
//  - cost of trace recording (the op recorder) per training step on the peer model (aim < 1%)
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <time.h>

#include <algorithm>
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

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

Plan PeerPlan() {
  Plan p = testing::WidePlan("micro_batch=8", 8);
  p.model.name = "gpt-peer-4x256";
  p.model.layers = 4;
  return p;
}

// Trace recording cost (issue 15 item 3), two ways on the peer model, one process, fp32:
//  1. end to end: two trainers of the same plan, one recording every op (record_ops, as --trace
//     runs), one not, stepped alternately (ABBA order, so drift of the shared machine's load hits
//     both alike); per-step process CPU time (and wall time) compared by medians;
//  2. bottom up: the recorder's own cost per op (open + close a scope, resolve the events) in a
//     tight loop, times the ops a step records, over the step's CPU time. On a loaded machine (1)
//     is bounded by noise; (2) is the deterministic figure.
// Arg: step pairs.
void RecordingCost(benchmark::State& state) {
  const Plan p = PeerPlan();
  CpuBackend be_rec, be_plain;
  auto world = LocalCommunicator();
  TrainerOptions on, off;
  on.record_ops = true;
  off.record_ops = false;
  auto rec = Trainer::Create(p, be_rec, *world, on);
  auto plain = Trainer::Create(p, be_plain, *world, off);
  if (!rec || !plain) {
    state.SkipWithError("trainer creation failed");
    return;
  }
  (void)(*rec)->Step();  // warm-up (allocator caches)
  (void)(*plain)->Step();
  const size_t ops_before = (*rec)->recorder().ops().size();
  const int64_t pairs = state.range(0);
  std::vector<double> cpu_rec, cpu_plain, wall_rec, wall_plain, cpu_diff;
  for (auto _ : state) {
    for (int64_t i = 0; i < pairs; ++i) {
      double c[2] = {0, 0}, w[2] = {0, 0};
      for (int j = 0; j < 2; ++j) {
        const int which = (i % 2 == 0) ? j : 1 - j;  // 0 = recording; ABBA order
        Trainer& t = which == 0 ? **rec : **plain;
        const double c0 = CpuSeconds();
        const auto w0 = std::chrono::steady_clock::now();
        auto r = t.Step();
        w[which] = Seconds(w0, std::chrono::steady_clock::now());
        c[which] = CpuSeconds() - c0;
        if (!r) {
          state.SkipWithError(r.error().message.c_str());
          return;
        }
      }
      cpu_rec.push_back(c[0]);
      cpu_plain.push_back(c[1]);
      wall_rec.push_back(w[0]);
      wall_plain.push_back(w[1]);
      cpu_diff.push_back(c[0] - c[1]);
    }
  }
  const double ops_per_step =
      static_cast<double>((*rec)->recorder().ops().size() - ops_before) / static_cast<double>(cpu_rec.size());

  // Bottom up: the recorder alone, on its own backend.
  CpuBackend be;
  OpRecorder r(&be, 0);
  r.set_epoch(be.RecordEvent(StreamKind::kCompute));
  const int kOps = 20000;
  const double c0 = CpuSeconds();
  for (int i = 0; i < kOps; ++i) {
    auto s = r.Op(OpKind::kFc1, i % 4, 1.0);
    if (i % 200 == 199) (void)r.Resolve();  // resolved once per "step" of 200 ops
  }
  (void)r.Resolve();
  const double per_op_s = (CpuSeconds() - c0) / kOps;

  const double step_cpu = Median(cpu_plain);
  state.SetLabel(p.model.name);
  state.counters["ops_per_step"] = ops_per_step;
  state.counters["step_cpu_ms_plain"] = step_cpu * 1e3;
  state.counters["step_cpu_ms_rec"] = Median(cpu_rec) * 1e3;
  state.counters["step_wall_ms_plain"] = Median(wall_plain) * 1e3;
  state.counters["step_wall_ms_rec"] = Median(wall_rec) * 1e3;
  // End to end: median of the paired differences, relative to the plain step's CPU time.
  state.counters["e2e_cost_pct"] = Median(cpu_diff) / step_cpu * 100.0;
  state.counters["e2e_wall_cost_pct"] = (Median(wall_rec) / Median(wall_plain) - 1.0) * 100.0;
  state.counters["recorder_ns_per_op"] = per_op_s * 1e9;
  state.counters["bottom_up_cost_pct"] = per_op_s * ops_per_step / step_cpu * 100.0;
}
BENCHMARK(RecordingCost)->Arg(8)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace parallax::executor
