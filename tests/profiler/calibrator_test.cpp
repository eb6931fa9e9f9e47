// The calibration loop with measure callbacks whose timings are scripted: warm-up discarded,
// median and IQR, noisy points measured again, failures skipped with their reason, a stop flag
// ends the run without results; the progress bar's ETA extrapolates by weight; cold kernel probes
// rotate over buffers larger than any cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>

#include "executor/cpu/cpu_backend.h"
#include "model/presets.h"
#include "profiler/calibrate/calibrate.h"
#include "profiler/calibrate/calibration_set.h"
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

CalibrationItem Item(std::string what, MeasureFn measure, RecordFn record) {
  CalibrationItem item;
  item.what = std::move(what);
  item.measure = std::move(measure);
  item.record = std::move(record);
  return item;
}

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
  c.Add(Item("gemm", s.Fn(), [&](const Measurement& m) { got.push_back(m); }));
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
  c.Add(Item("noisy", s.Fn(), [&](const Measurement& m) { got = m; }));
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
  c.Add(Item(
      "gemm m=65536 n=65536 k=65536 bf16",
      [](int64_t) -> Result<std::vector<double>> { return Error{"out of memory: 24 GiB requested", ErrorKind::kIo}; },
      [&](const Measurement&) { ++recorded; }));
  Script ok;
  c.Add(Item("small", ok.Fn(), [&](const Measurement&) { ++recorded; }));
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
  c.Add(Item(
      "first",
      [&](int64_t n) -> Result<std::vector<double>> {
        stop = true;  // as SIGINT would, mid-run
        return std::vector<double>(static_cast<size_t>(n), 1.0);
      },
      [&](const Measurement&) { ++recorded; }));
  Script never;
  c.Add(Item("second", never.Fn(), [&](const Measurement&) { ++recorded; }));
  auto r = c.Run();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "interrupted: nothing written");
  EXPECT_TRUE(never.calls.empty());
}

// Rounds: every item's first chunk, then every item's second, ...; the first chunk after the full
// warm-up, later ones after round_warmup runs; buffers released after each chunk; the median over
// the pooled runs; items that must run in order come after the rounds and record after them.
TEST(Calibrator, RoundsTakeEachItemsChunksInTurnAndPoolTheRuns) {
  std::vector<std::string> log;
  auto item = [&](const std::string& name, std::vector<std::vector<double>> rounds) {
    auto left = std::make_shared<std::deque<std::vector<double>>>(rounds.begin(), rounds.end());
    CalibrationItem it = Item(
        name,
        [&log, name, left](int64_t n) -> Result<std::vector<double>> {
          log.push_back(name + ":" + std::to_string(n));
          if (n == 2 || n == 1) {
            if (left->empty() || static_cast<int64_t>(left->front().size()) != n) return std::vector<double>(n, 99.0);
          }
          auto b = left->front();
          left->pop_front();
          return b;
        },
        [&log, name](const Measurement& m) { log.push_back(name + " median " + std::to_string(m.median_s)); });
    it.release = [&log, name] { log.push_back(name + " release"); };
    return it;
  };
  CalibratorOptions o;
  o.warmup = 2;
  o.repetitions = 7;  // chunks of 3, 2, 2
  o.rounds = 3;
  o.round_warmup = 1;
  o.max_relative_spread = 10;
  Calibrator c(o);
  c.Add(item("a", {{1, 1, 1}, {5, 5}, {3, 3}}));  // pooled 1 1 1 3 3 5 5: median 3
  c.Add(item("b", {{2, 2, 2}, {2, 2}, {4, 4}}));
  CalibrationItem last = item("c", {{7, 7, 7, 7, 7, 7, 7}});
  last.interleave = false;
  c.Add(std::move(last));
  auto r = c.Run();
  ASSERT_TRUE(r);
  const std::vector<std::string> want = {
      "a:2", "a:3", "a release", "b:2", "b:3", "b release",        // round 1: full warm-up
      "a:1", "a:2", "a release", "b:1", "b:2", "b release",        // round 2: one warm-up run
      "a:1", "a:2", "a release", "b:1", "b:2", "b release",        // round 3
      "a median 3.000000", "b median 2.000000",                    // recorded in item order
      "c:2", "c:7", "c median 7.000000", "c release"};             // in order, all runs at once
  EXPECT_EQ(want, log);
  EXPECT_EQ(r->measured, 3);
}

// A machine that runs at half speed for the last two thirds of the calibration (a VM switching
// speed). Back to back, the points measured in the first third come out twice as fast against the
// others; taken in one-run rounds, every point's median sees the same slow majority, so the points
// keep their true ratios.
TEST(Calibrator, RoundsKeepThePointsRatiosOnAMachineThatChangesSpeed) {
  auto calibrate = [](int64_t rounds) {
    const std::vector<double> cost = {1, 2, 3, 4, 5, 6};
    constexpr int64_t kWarmup = 1, kReps = 9;
    // Every run of the calibration, warm-ups included, in the order they happen.
    const int64_t total = static_cast<int64_t>(cost.size()) * (kWarmup + kReps + (rounds - 1) * kWarmup);
    auto runs = std::make_shared<int64_t>(0);
    std::vector<double> got(cost.size(), 0);
    CalibratorOptions o;
    o.warmup = kWarmup;
    o.repetitions = kReps;
    o.rounds = rounds;
    o.round_warmup = kWarmup;
    o.max_relative_spread = 10;
    Calibrator c(o);
    for (size_t i = 0; i < cost.size(); ++i) {
      c.Add(Item(
          "p" + std::to_string(i),
          [runs, total, t = cost[i]](int64_t n) -> Result<std::vector<double>> {
            std::vector<double> out;
            for (int64_t k = 0; k < n; ++k) out.push_back(t * (3 * (*runs)++ < total ? 1.0 : 2.0));
            return out;
          },
          [&got, i](const Measurement& m) { got[i] = m.median_s; }));
    }
    EXPECT_TRUE(c.Run());
    return got;
  };
  const std::vector<double> back_to_back = calibrate(1);
  EXPECT_DOUBLE_EQ(back_to_back[0], 1.0);  // measured while fast
  EXPECT_DOUBLE_EQ(back_to_back[5], 12.0);  // while slow: 6 x 2, so the ratio reads 12, not 6
  for (int64_t r : {3, 9}) {  // the default, and one run per round
    const std::vector<double> rounds = calibrate(r);
    for (size_t i = 0; i < rounds.size(); ++i) {
      EXPECT_DOUBLE_EQ(rounds[i] / rounds[0], static_cast<double>(i + 1)) << r << " rounds, point " << i;
    }
  }
}

// A point that fails part-way through its first attempt (round 2 of 3) is skipped with its
// reason and the progress bar still reaches its total; a point that measured once and fails when
// measured again for being noisy keeps its first attempt, in rounds and back to back alike.
TEST(Calibrator, FailuresPartWaySkipOrKeepTheEarlierAttempt) {
  for (int64_t rounds : {1, 3}) {
    CalibratorOptions o;
    o.warmup = 1;
    o.repetitions = 3;
    o.rounds = rounds;
    o.max_relative_spread = 0.1;
    o.max_remeasures = 2;
    Calibrator c(o);
    int calls = 0, first_records = 0;
    c.Add(Item(
        "fails in round 2",
        [&](int64_t n) -> Result<std::vector<double>> {
          if (++calls == 3) return Error{"out of memory", ErrorKind::kIo};  // warm-up, chunk 1, then round 2
          return std::vector<double>(static_cast<size_t>(n), 1.0);
        },
        [&](const Measurement&) { ++first_records; }));
    int noisy_calls = 0;
    Measurement kept;
    c.Add(Item(
        "noisy, then fails",
        [&](int64_t n) -> Result<std::vector<double>> {
          // The first attempt (every chunk) is noisy; whatever comes after fails.
          const int first_attempt_calls = rounds == 1 ? 2 : 6;
          if (++noisy_calls > first_attempt_calls) return Error{"device lost", ErrorKind::kIo};
          std::vector<double> t;
          for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<double>(noisy_calls + i));
          return t;
        },
        [&](const Measurement& m) { kept = m; }));
    std::string out;
    {
      std::FILE* f = std::tmpfile();
      ASSERT_NE(f, nullptr);
      ProgressBar bar(f, "calibrate", c.TotalWeight(), [] { return 0.0; });
      auto r = c.Run(&bar);
      std::rewind(f);
      for (int ch = std::fgetc(f); ch != EOF; ch = std::fgetc(f)) out.push_back(static_cast<char>(ch));
      std::fclose(f);
      ASSERT_TRUE(r);
      if (rounds > 1) {
        ASSERT_EQ(r->skipped.size(), 1u) << rounds << " rounds";
        EXPECT_EQ(r->skipped[0].what, "fails in round 2");
      }
      EXPECT_EQ(r->measured, rounds > 1 ? 1 : 2) << rounds << " rounds";  // back to back: 3 runs in one call
    }
    EXPECT_EQ(first_records, rounds > 1 ? 0 : 1) << rounds << " rounds: measured whole only back to back";
    EXPECT_GT(kept.median_s, 0) << rounds << " rounds: the first attempt is kept";
    EXPECT_NE(out.rfind("100%"), std::string::npos) << rounds << " rounds: " << out;
  }
}

// In rounds, a noisy point is measured again in rounds (only the noisy ones), the quietest attempt
// kept; a point that cannot run is skipped with its reason and not tried in later rounds.
TEST(Calibrator, RoundsMeasureNoisyPointsAgainAndSkipFailures) {
  CalibratorOptions o;
  o.warmup = 1;
  o.repetitions = 4;
  o.rounds = 2;
  o.max_relative_spread = 0.1;
  o.max_remeasures = 2;
  Calibrator c(o);
  Script noisy;
  // round 1 (warm-up, 2 runs), round 2 (warm-up, 2 runs): pooled 1 2 3 4, noisy; again: 2 2 2 2.
  noisy.batches = {{9}, {1, 2}, {9}, {3, 4}, {9}, {2, 2}, {9}, {2, 2}};
  Measurement noisy_got;
  c.Add(Item("noisy", noisy.Fn(), [&](const Measurement& m) { noisy_got = m; }));
  int failing_calls = 0;
  c.Add(Item(
      "too big",
      [&](int64_t) -> Result<std::vector<double>> {
        ++failing_calls;
        return Error{"out of memory", ErrorKind::kIo};
      },
      [](const Measurement&) { ADD_FAILURE() << "a skipped point is never recorded"; }));
  Script quiet;
  int quiet_records = 0;
  c.Add(Item("quiet", quiet.Fn(), [&](const Measurement&) { ++quiet_records; }));
  auto r = c.Run();
  ASSERT_TRUE(r);
  EXPECT_EQ((std::vector<int64_t>{1, 2, 1, 2, 1, 2, 1, 2}), noisy.calls);
  EXPECT_DOUBLE_EQ(noisy_got.median_s, 2.0);
  EXPECT_EQ(noisy_got.remeasured, 1);
  EXPECT_EQ(noisy_got.repetitions, 4);
  EXPECT_EQ(failing_calls, 1);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_EQ(r->skipped[0].reason, "out of memory");
  EXPECT_EQ((std::vector<int64_t>{1, 2, 1, 2}), quiet.calls);  // quiet: not measured again
  EXPECT_EQ(quiet_records, 1);
  EXPECT_EQ(r->measured, 2);
  EXPECT_EQ(r->remeasured, 1);
  EXPECT_EQ(r->still_noisy, 0);
}

TEST(Calibrator, AStopFlagEndsARoundsRunWithNothingRecorded) {
  std::atomic<bool> stop{false};
  CalibratorOptions o;
  o.warmup = 0;
  o.repetitions = 4;
  o.rounds = 2;
  o.stop = &stop;
  Calibrator c(o);
  int recorded = 0;
  int calls = 0;
  c.Add(Item(
      "first",
      [&](int64_t n) -> Result<std::vector<double>> {
        if (++calls == 2) stop = true;  // in the second round
        return std::vector<double>(static_cast<size_t>(n), 1.0);
      },
      [&](const Measurement&) { ++recorded; }));
  Script other;
  c.Add(Item("second", other.Fn(), [&](const Measurement&) { ++recorded; }));
  auto r = c.Run();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "interrupted: nothing written");
  EXPECT_EQ(recorded, 0);
  EXPECT_EQ(other.calls.size(), 1u);  // its first-round chunk only
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

// A weight-gradient GEMM runs as dW (fp32) += dY^T X (beta 1): probed that way, and a shape the
// model also runs as a plain GEMM is probed both ways (gpt-tiny at micro-batch 2 has T = 64 =
// hidden, so attn_out's forward 64x64x64 and its weight gradient 64x64x64 coincide).
TEST(CalibrationSet, WeightGradientShapesAreProbedAccumulating) {
  const ModelSpec m = *ModelPreset("gpt-tiny");
  ASSERT_EQ(m.seq_len * 2, m.hidden);
  CalibrationSetOptions o;
  o.model = &m;
  o.quick = true;
  const CalibrationSet set = BuildCalibrationSet(o);
  int plain = 0, accumulating = 0;
  for (const GemmPoint& g : set.gemms) {
    if (g.probe.m != m.hidden || g.probe.n != m.hidden || g.probe.k != m.hidden || g.probe.batch != 1) continue;
    if (g.probe.beta != 0) {
      ++accumulating;
      EXPECT_EQ(g.probe.ta, executor::Trans::kYes);
      EXPECT_NE(g.probe.Describe().find("accumulate"), std::string::npos);
    } else {
      ++plain;
    }
  }
  EXPECT_EQ(plain, 1);
  EXPECT_EQ(accumulating, 1);
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

std::string ReadAll(std::FILE* f) {
  std::string out;
  std::rewind(f);
  for (int ch = std::fgetc(f); ch != EOF; ch = std::fgetc(f)) out.push_back(static_cast<char>(ch));
  return out;
}

// Into a log file: whole lines, no carriage return or escape code, one per tenth of the bar.
TEST(ProgressBar, IntoAFileWritesPlainLinesOncePerTenth) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(f, "calibrate", 100.0, [] { return 0.0; });
    for (int done = 0; done <= 100; ++done) bar.Update(done, "gemm");
    bar.Finish();
  }
  const std::string out = ReadAll(f);
  std::fclose(f);
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.find('\033'), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 12) << out;  // 0%, 10%, ..., 100%, done
  EXPECT_NE(out.find(" 50% "), std::string::npos) << out;
  EXPECT_NE(out.find("calibrate done in"), std::string::npos) << out;
}

// On a terminal the line redraws in place.
TEST(ProgressBar, OnATerminalRedrawsOneLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(f, "calibrate", 10.0, [] { return 0.0; }, ProgressStyle::kRedraw);
    bar.Update(10, "gemm");
    bar.Finish();
  }
  const std::string out = ReadAll(f);
  std::fclose(f);
  EXPECT_EQ(out.rfind('\r', 0), 0u) << out;
  EXPECT_NE(out.find("\033[K"), std::string::npos) << out;
}

// Noisy points measured again add work near the end: the bar shares out what is left of it
// instead of jumping back (it used to fall from 98% to 83%).
TEST(ProgressBar, NeverGoesBackWhenWorkIsAddedOnTheWay) {
  ProgressBar bar(nullptr, "calibrate", 100.0, [] { return 0.0; });
  bar.Update(98, "last point");
  EXPECT_DOUBLE_EQ(bar.Fraction(98), 0.98);
  bar.Extend(20);
  EXPECT_DOUBLE_EQ(bar.Fraction(98), 0.98);
  double before = bar.Fraction(98);
  for (int half_units = 196; half_units <= 240; ++half_units) {
    const double done = half_units / 2.0;
    bar.Update(done, "again, round 1/3");
    EXPECT_GE(bar.Fraction(done), before) << done;
    before = bar.Fraction(done);
  }
  EXPECT_DOUBLE_EQ(bar.Fraction(120), 1.0);
  EXPECT_NE(bar.Line(120, "").find("100%"), std::string::npos);
}

}  // namespace
}  // namespace parallax::profiler
