// Speed of model counting (called for every candidate layout by the planner).
#include <benchmark/benchmark.h>

#include "model/counting.h"
#include "model/presets.h"

namespace {

void BM_CountModel(benchmark::State& state) {
  const auto m = *parallax::ModelPreset("gpt3-175b");
  for (auto _ : state) benchmark::DoNotOptimize(parallax::CountModel(m));
}
BENCHMARK(BM_CountModel);

void BM_ActivationBytesPerLayer(benchmark::State& state) {
  const auto m = *parallax::ModelPreset("llama3-70b");
  parallax::ActivationOptions o;
  o.tp = 8;
  o.sequence_parallel = true;
  for (auto _ : state) benchmark::DoNotOptimize(parallax::ActivationBytesPerLayer(m, o));
}
BENCHMARK(BM_ActivationBytesPerLayer);

}  // namespace
