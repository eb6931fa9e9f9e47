// Simulator speed: simulated events (ops) per second for a 1024-GPU gpt3-175b step, with and
// without recording the predicted trace.
#include <benchmark/benchmark.h>

#include "model/presets.h"
#include "planner/sim/simulator.h"

namespace parallax::planner {
namespace {

void BM_SimulateGpt3Step(benchmark::State& state) {
  Plan p;
  p.model = *ModelPreset("gpt3-175b");
  p.cluster = *ClusterPreset("dgx-a100");
  p.cluster.nodes = 128;
  p.layout = *ParseInlineLayout(
      "dp=16,tp=8,pp=8,zero=1,micro_batch=1,global_batch=1536,recompute=full,schedule=interleaved,virtual_stages=2");
  p.training.global_batch = 1536;
  SimOptions o;
  o.record_trace = state.range(0) != 0;
  int64_t events = 0;
  for (auto _ : state) {
    auto r = Simulate(p, nullptr, o);
    events += r->events;
    benchmark::DoNotOptimize(r->prediction.step_time_s);
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimulateGpt3Step)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace parallax::planner
