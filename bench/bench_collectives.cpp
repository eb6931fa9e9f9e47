// MPI all-reduce bandwidth of the CPU backend's communicator on its dp stream (enqueue, then wait
// for the stream's event), in nccl-tests' definitions (doc/PERFORMANCE.md there): algbw = bytes /
// time, busbw = algbw * 2(n-1)/n.
// Run under mpirun: `mpirun -np 2 bench_collectives`. Iteration counts are fixed so every rank
// runs the same number of collectives; only rank 0 reports.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "executor/launch.h"

namespace parallax::executor {
namespace {

Communicator* g_world = nullptr;

void AllReduce(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  CpuBackend be;
  auto buf = be.AllocateZeroed(bytes / 4, DType::kF32, MemoryKind::kWorkspace);
  if (!buf) state.SkipWithError(buf.error().message.c_str());
  (void)g_world->Barrier();
  double seconds = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = g_world->AllReduce(buf->ptr(), buf->numel(), ReduceOp::kSum, be.stream(StreamKind::kDpComm));
    if (s) s = be.SynchronizeEvent(be.RecordEvent(StreamKind::kDpComm));
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!s) state.SkipWithError(s.error().message.c_str());
  }
  const double n = g_world->size();
  const double t = seconds / static_cast<double>(state.iterations());
  state.counters["size_B"] = static_cast<double>(bytes);
  state.counters["time_us"] = t * 1e6;
  state.counters["algbw_GBps"] = static_cast<double>(bytes) / t * 1e-9;
  state.counters["busbw_GBps"] = static_cast<double>(bytes) / t * 1e-9 * 2.0 * (n - 1.0) / n;
}
BENCHMARK(AllReduce)->RangeMultiplier(8)->Range(1 << 10, 64 << 20)->Iterations(20)->UseRealTime();

class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace parallax::executor

int main(int argc, char** argv) {
  auto launch = parallax::executor::InitLaunch(&argc, &argv);
  auto world = launch->World(120);
  if (!world) {
    std::fprintf(stderr, "%s\n", world.error().message.c_str());
    return 1;
  }
  parallax::executor::g_world = world->get();
  benchmark::Initialize(&argc, argv);
  if (launch->world_rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    parallax::executor::SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  return 0;
}
