// Simulator speed: simulated events (ops) per second for a 1024-GPU gpt3-175b step, with and
// without recording the predicted trace.
#include <benchmark/benchmark.h>

#include "bench/bench_plans.h"
#include "planner/sim/simulator.h"

namespace parallax::planner {
namespace {

void BM_SimulateGpt3Step(benchmark::State& state) {
  const Plan p = bench::Gpt3On1024Gpus();
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
