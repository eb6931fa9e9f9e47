// Planner speed: closed-form estimates per second and a whole `parallax plan` search
// (gpt3-175b on 128 dgx-a100 nodes = 1024 GPUs, full space; target < 2 s wall on 2 cores), and
// the mixture-of-experts search (DeepSeek-V3 on 128 dgx-h100 nodes = 1024 H100s with ep and etp,
// megatron-core profile; target < 2 s, issue 37 item 4).
// The searches print both clocks: "Time" is wall time, "CPU" the whole process's CPU time (all
// search threads: MeasureProcessCPUTime), so a figure taken on a loaded machine can be read against
// the work done.
#include <benchmark/benchmark.h>

#include "bench/bench_plans.h"
#include "model/presets.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/search/search.h"

namespace parallax::planner {
namespace {

void BM_ClosedFormEstimate(benchmark::State& state) {
  Plan plan = bench::Gpt3On1024Gpus();
  CostContext ctx(plan.cluster, plan.training.precision);
  for (auto _ : state) {
    const StepTime st = EstimateStepTime(plan, CostPlan(ctx, plan));
    benchmark::DoNotOptimize(st.step_time_s);
  }
  state.counters["estimates_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ClosedFormEstimate);

void BM_PlanGpt3On1024Gpus(benchmark::State& state) {
  const ModelSpec m = *ModelPreset("gpt3-175b");
  ClusterSpec c = *ClusterPreset("dgx-a100");
  c.nodes = 128;
  TrainingSpec t;
  t.global_batch = 0;  // searched over the default range
  int64_t searched = 0;
  for (auto _ : state) {
    auto r = Search(m, c, t, SearchOptions{});
    searched = r->searched;
    benchmark::DoNotOptimize(r->plans.size());
  }
  state.counters["layouts"] = static_cast<double>(searched);
  state.counters["layouts_per_s"] =
      benchmark::Counter(static_cast<double>(searched) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PlanGpt3On1024Gpus)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()->Iterations(3);

void BM_PlanDeepSeekV3On1024H100(benchmark::State& state) {
  const ModelSpec m = *ModelPreset("deepseek-v3");
  ClusterSpec c = *ClusterPreset("dgx-h100");
  c.nodes = 128;
  TrainingSpec t;
  t.global_batch = 0;  // searched over the default range
  SearchOptions o;
  o.implementation = *ImplementationPreset("megatron-core");
  int64_t searched = 0;
  for (auto _ : state) {
    auto r = Search(m, c, t, o);
    searched = r->searched;
    benchmark::DoNotOptimize(r->plans.size());
  }
  state.counters["layouts"] = static_cast<double>(searched);
  state.counters["layouts_per_s"] =
      benchmark::Counter(static_cast<double>(searched) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PlanDeepSeekV3On1024H100)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()->Iterations(3);

// Issue 36's long-sequence search: Llama 3.1 405B at 131072 tokens on 16,384 H100s (2048 DGX
// nodes), the megatron-core profile, the global batch searched (4-32 sequences: 0.5M-4M tokens),
// cp in the space. Target: under 2 s on a 2-core machine.
void BM_PlanLlama405bSeq128kOn16384Gpus(benchmark::State& state) {
  ModelSpec m = *ModelPreset("llama3-405b");
  m.seq_len = 131072;
  ClusterSpec c = *ClusterPreset("dgx-h100");
  c.nodes = 2048;
  TrainingSpec t;
  SearchOptions o;
  o.implementation = *ImplementationPreset("megatron-core");
  int64_t searched = 0, best_cp = 0;
  for (auto _ : state) {
    auto r = Search(m, c, t, o);
    searched = r->searched;
    best_cp = r->plans.empty() ? 0 : r->plans.front().layout.cp;
    benchmark::DoNotOptimize(r->plans.size());
  }
  state.counters["layouts"] = static_cast<double>(searched);
  state.counters["best_cp"] = static_cast<double>(best_cp);
  state.counters["layouts_per_s"] =
      benchmark::Counter(static_cast<double>(searched) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PlanLlama405bSeq128kOn16384Gpus)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(3);

}  // namespace
}  // namespace parallax::planner
