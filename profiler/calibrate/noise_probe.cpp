#include "profiler/calibrate/noise_probe.h"

#include <algorithm>
#include <cmath>

#include "profiler/calibrate/backend_timer.h"
#include "profiler/calibrate/kernel_probe.h"
#include "profiler/calibrate/measurement.h"

namespace parallax::profiler {
SystemNoise NoiseFromQuanta(const std::vector<double>& quanta_s, int64_t quantiles) {
  SystemNoise out;
  constexpr size_t kMinWindows = 16;
  if (quanta_s.size() < kMinWindows || quantiles < 1) return out;
  std::vector<double> prefix(quanta_s.size() + 1, 0.0);
  for (size_t i = 0; i < quanta_s.size(); ++i) prefix[i + 1] = prefix[i] + quanta_s[i];
  out.source = "calibrate";
  out.quantum_s = Summarize(quanta_s).median_s;
  out.ranks = 1;
  out.duration_s = prefix.back();
  for (size_t w = 1; quanta_s.size() / w >= kMinWindows; w *= 4) {
    const size_t stride = std::max<size_t>(1, w / 4);
    std::vector<double> sums;
    for (size_t b = 0; b + w <= quanta_s.size(); b += stride) sums.push_back(prefix[b + w] - prefix[b]);
    std::sort(sums.begin(), sums.end());
    // Centred on the median window: a calibrated op time is a median too, so what it leaves out
    // is this distribution's part above (mean) and around (spread) the median.
    const double median = Quantile(sums, 0.5);
    NoiseWindow nw;
    nw.window_s = median;
    for (int64_t q = 0; q < quantiles; ++q) {
      nw.detour_s.push_back(Quantile(sums, (static_cast<double>(q) + 0.5) / static_cast<double>(quantiles)) - median);
    }
    out.windows.push_back(std::move(nw));
  }
  return out;
}

Result<SystemNoise> MeasureNoise(executor::Backend& backend, executor::Communicator& world, const NoiseOptions& o) {
  // The quantum: a chain of small GEMMs, long enough that two events per quantum cost little.
  ProbeShape shape;
  shape.kind = ProbeKind::kGemm;
  shape.dtype = o.dtype;
  shape.m = shape.n = shape.k = 128;
  KernelProbe probe(shape);
  Status prepared = probe.Prepare(backend);
  // Every rank learns whether any failed before anyone runs a collective the others skip.
  double flags[2] = {prepared ? 0.0 : 1.0, 0.0};
  auto one = [&]() -> Status { return probe.Run(backend); };
  // Every rank takes part in the turns (their barriers), prepared or not.
  const MeasureFn warm_runs = InTurns(
      world,
      [&](int64_t n) -> Result<std::vector<double>> {
        if (!prepared) return prepared.error();
        return TimeRuns(backend, executor::StreamKind::kCompute, n, one);
      },
      o.turns);
  auto warm = warm_runs(20);
  if (!warm) flags[0] = 1.0;
  flags[1] = warm ? Summarize(*warm).median_s : 0.0;
  PX_TRY(world.HostAllReduce(flags, 2, executor::ReduceOp::kMax));
  if (flags[0] > 0) {
    if (!prepared) return prepared.error();
    if (!warm) return warm.error();
    return IoError("noise quanta: another rank could not run the quantum");
  }
  const double gemm_s = std::max(flags[1], 1e-9);
  const auto reps = static_cast<int64_t>(std::clamp(std::ceil(o.quantum_s / gemm_s), 1.0, 1000.0));
  const auto count =
      static_cast<int64_t>(std::clamp(std::floor(o.duration_s / (gemm_s * static_cast<double>(reps))), 256.0, 200000.0));
  auto quantum = [&]() -> Status {
    for (int64_t r = 0; r < reps; ++r) {
      PX_TRY(probe.Run(backend));
    }
    return {};
  };
  PX_TRY(world.Barrier());
  auto times = InTurns(world, [&](int64_t n) { return TimeRuns(backend, executor::StreamKind::kCompute, n, quantum); },
                       o.turns)(count);
  double failed = times ? 0.0 : 1.0;
  if (o.interrupt != nullptr && o.interrupt->load()) failed = 2.0;
  PX_TRY(world.HostAllReduce(&failed, 1, executor::ReduceOp::kMax));
  if (failed >= 2) return IoError("interrupted");
  if (failed > 0) return times ? IoError("noise quanta: another rank failed") : times.error();
  const SystemNoise mine = NoiseFromQuanta(*times, o.quantiles);
  // Average the ranks' figures (same windows everywhere: every rank ran `count` quanta).
  std::vector<double> buf{mine.quantum_s, mine.duration_s};
  for (const NoiseWindow& w : mine.windows) {
    buf.push_back(w.window_s);
    buf.insert(buf.end(), w.detour_s.begin(), w.detour_s.end());
  }
  PX_TRY(world.HostAllReduce(buf.data(), static_cast<int64_t>(buf.size()), executor::ReduceOp::kSum));
  const auto n = static_cast<double>(world.size());
  SystemNoise out = mine;
  out.ranks = world.size();
  out.quantum_s = buf[0] / n;
  out.duration_s = buf[1] / n;
  size_t at = 2;
  for (NoiseWindow& w : out.windows) {
    w.window_s = buf[at++] / n;
    for (double& q : w.detour_s) q = buf[at++] / n;
  }
  return out;
}

}  // namespace parallax::profiler
