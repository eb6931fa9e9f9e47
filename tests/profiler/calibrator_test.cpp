// The calibration loop with measure callbacks whose timings are scripted: warm-up discarded,
// median and IQR, noisy points measured again, failures skipped with their reason, a stop flag
// ends the run without results; the progress bar's ETA extrapolates by weight; cold kernel probes
// rotate over buffers larger than any cache.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>

#include "executor/cpu/cpu_backend.h"
#include "profiler/calibrate/calibrate.h"
#include "profiler/calibrate/calibrator.h"
#include "profiler/calibrate/kernel_probe.h"

namespace parallax::profiler {
namespace {

//! A measure callback that returns scripted batches of timings and counts its calls.
struct Script {
  std::deque<std::vector<double>> batches;
  std::vector<int64_t> calls;
  MeasureFn Fn() {
    return [this](int64_t n) -> Result<std::vector<double>> {
      calls.push_back(n);
      if (batches.empty()) return std::vector<double>(static_cast<size_t>(n), 1.0);
      auto b = batches.front();
      batches.pop_front();
      return b;
    };
  }
};

TEST(Measurement, MedianAndInterquartileRange) {
  const Measurement m = Summarize({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(m.median_s, 3);
  EXPECT_DOUBLE_EQ(m.spread_s, 2);  // q3 = 4, q1 = 2 (numpy linear)
  EXPECT_EQ(m.repetitions, 5);
  EXPECT_DOUBLE_EQ(Summarize({1, 2, 3, 4}).median_s, 2.5);
}

TEST(Calibrator, WarmUpIsDiscardedAndTheMedianRecorded) {
  Script s;
  s.batches = {{100, 100}, {1.0, 1.1, 0.9, 1.0, 50.0}};  // warm-up, then 5 runs with one outlier
  CalibratorOptions o;
  o.warmup = 2;
  o.repetitions = 5;
  o.max_relative_spread = 0.25;
  Calibrator c(o);
  std::vector<Measurement> got;
  c.Add({"gemm", 0, s.Fn(), [&](const Measurement& m) { got.push_back(m); }});
  auto r = c.Run();
  ASSERT_TRUE(r);
  EXPECT_EQ((std::vector<int64_t>{2, 5}), s.calls);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_DOUBLE_EQ(got[0].median_s, 1.0);
  EXPECT_NEAR(got[0].spread_s, 0.1, 1e-12);
  EXPECT_EQ(got[0].remeasured, 0);
  EXPECT_EQ(r->measured, 1);
}

TEST(Calibrator, NoisyPointsAreMeasuredAgainAndTheQuietestKept) {
  Script s;
  s.batches = {{1}, {1, 2, 3, 4, 5}, {2.0, 2.0, 2.1, 2.0, 2.0}};
  CalibratorOptions o;
  o.warmup = 1;
  o.repetitions = 5;
  o.max_relative_spread = 0.1;
  o.max_remeasures = 3;
  Calibrator c(o);
  Measurement got;
  c.Add({"noisy", 0, s.Fn(), [&](const Measurement& m) { got = m; }});
  auto r = c.Run();
  ASSERT_TRUE(r);
  EXPECT_EQ((std::vector<int64_t>{1, 5, 5}), s.calls);  // stops once quiet
  EXPECT_DOUBLE_EQ(got.median_s, 2.0);
  EXPECT_EQ(got.remeasured, 1);
  EXPECT_EQ(r->remeasured, 1);
  EXPECT_EQ(r->still_noisy, 0);
}

TEST(Calibrator, PointsThatCannotRunAreSkippedWithTheReason) {
  CalibratorOptions o;
  o.warmup = 1;
  o.repetitions = 3;
  Calibrator c(o);
  int recorded = 0;
  c.Add({"gemm m=65536 n=65536 k=65536 bf16", 0,
         [](int64_t) -> Result<std::vector<double>> { return Error{"out of memory: 24 GiB requested", ErrorKind::kIo}; },
         [&](const Measurement&) { ++recorded; }});
  Script ok;
  c.Add({"small", 0, ok.Fn(), [&](const Measurement&) { ++recorded; }});
  auto r = c.Run();
  ASSERT_TRUE(r);
  EXPECT_EQ(recorded, 1);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_EQ(r->skipped[0].what, "gemm m=65536 n=65536 k=65536 bf16");
  EXPECT_EQ(r->skipped[0].reason, "out of memory: 24 GiB requested");
}

TEST(Calibrator, AStopFlagEndsTheRunWithAnError) {
  std::atomic<bool> stop{false};
  CalibratorOptions o;
  o.warmup = 0;
  o.repetitions = 2;
  o.stop = &stop;
  Calibrator c(o);
  int recorded = 0;
  c.Add({"first", 0,
         [&](int64_t n) -> Result<std::vector<double>> {
           stop = true;  // as SIGINT would, mid-run
           return std::vector<double>(static_cast<size_t>(n), 1.0);
         },
         [&](const Measurement&) { ++recorded; }});
  Script never;
  c.Add({"second", 0, never.Fn(), [&](const Measurement&) { ++recorded; }});
  auto r = c.Run();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "interrupted: nothing written");
  EXPECT_TRUE(never.calls.empty());
}

// The end-to-end contention factor reproduces the measurement through the planner's overlap model:
// both = compute + comm * (1 - 1/k).
TEST(Contention, FactorReproducesTheOverlapMeasurement) {
  const double compute = 300e-6, comm = 100e-6;
  for (double hidden_fraction : {0.9, 0.5, 0.25, 0.05}) {
    const double both = compute + comm * (1 - hidden_fraction);
    const double k = ContentionFromOverlap(compute, comm, both);
    EXPECT_NEAR(k, 1 / hidden_fraction, 1e-9);
    EXPECT_NEAR(compute + comm * (1 - 1 / k), both, 1e-12);
  }
  // Everything hidden (or a faster overlapped run, from noise): no slowdown.
  EXPECT_DOUBLE_EQ(ContentionFromOverlap(compute, comm, compute), 1.0);
  EXPECT_EQ(ContentionFromOverlap(compute, comm, compute * 0.9), 1.0);
  // Nothing hidden, or worse than serial: the cap.
  EXPECT_EQ(ContentionFromOverlap(compute, comm, compute + comm), kMaxContention);
  EXPECT_EQ(ContentionFromOverlap(compute, comm, compute + 2 * comm), kMaxContention);
}

// A cold probe (the ZeRO passes' families) keeps copies of its buffers that add up to more than
// any cache and runs on each in turn: the y += x of each run reads a set the run before it did
// not touch. A hot probe keeps one set.
TEST(KernelProbe, ColdProbesRotateOverBuffersLargerThanAnyCache) {
  executor::CpuBackend be;
  ProbeShape p;
  p.kind = ProbeKind::kAxpy;
  p.n = 1 << 16;  // 256 KiB a buffer, 512 KiB a set
  KernelProbe hot(p);
  ASSERT_TRUE(hot.Prepare(be));
  EXPECT_EQ(be.memory().current_bytes, 2 * p.n * 4);
  hot.Release();
  p.cold = true;
  KernelProbe cold(p);
  ASSERT_TRUE(cold.Prepare(be));
  EXPECT_GE(be.memory().current_bytes, KernelProbe::kColdBytes);
  EXPECT_LT(be.memory().current_bytes, KernelProbe::kColdBytes + p.FootprintBytes());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cold.Run(be));
  EXPECT_NE(p.Describe().find("cold"), std::string::npos) << p.Describe();
  cold.Release();
  EXPECT_EQ(be.memory().current_bytes, 0);
}

TEST(ProgressBar, EtaExtrapolatesTheElapsedTimeByWeight) {
  double now = 100;
  ProgressBar bar(nullptr, "calibrate", 10.0, [&] { return now; });
  now = 130;  // 30 s for the first 3 units
  EXPECT_DOUBLE_EQ(bar.EtaSeconds(3), 70);
  EXPECT_EQ(bar.Line(3, "gemm 512"), "calibrate [#######.................]  30% ETA 1m10s  gemm 512");
  EXPECT_EQ(FormatDuration(42), "42s");
  EXPECT_EQ(FormatDuration(3725), "1h02m");
}

}  // namespace
}  // namespace parallax::profiler
