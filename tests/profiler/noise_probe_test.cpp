// Fixed work quanta -> noise quantiles (profiler/calibrate/noise_probe.h), on series whose detours
// are known: a quiet series has none; a detour every 16 quanta stands above the median of short
// windows and is part of the median of windows that always hold it.
#include <gtest/gtest.h>

#include <vector>

#include "profiler/calibrate/noise_probe.h"

namespace parallax::profiler {
namespace {

TEST(NoiseFromQuanta, QuietSeriesHasNoNoise) {
  const std::vector<double> q(1024, 50e-6);
  const SystemNoise n = NoiseFromQuanta(q, 8);
  ASSERT_TRUE(n.measured());
  EXPECT_DOUBLE_EQ(n.quantum_s, 50e-6);
  // Windows of 1, 4, 16, 64 quanta (at least 16 windows of each fit in 1024).
  ASSERT_EQ(n.windows.size(), 4u);
  EXPECT_NEAR(n.windows[3].window_s, 64 * 50e-6, 1e-15);
  for (const NoiseWindow& w : n.windows) {
    ASSERT_EQ(w.detour_s.size(), 8u);
    for (double d : w.detour_s) EXPECT_NEAR(d, 0.0, 1e-15);
  }
}

TEST(NoiseFromQuanta, PeriodicDetourShowsAboveTheMedianAndAveragesOut) {
  std::vector<double> q(1024, 50e-6);
  for (size_t i = 7; i < q.size(); i += 16) q[i] += 30e-6;  // one 30 us detour per 16 quanta
  const SystemNoise n = NoiseFromQuanta(q, 4);
  ASSERT_EQ(n.windows.size(), 4u);
  // One quantum: the median quantum is undisturbed; 1 in 16 is 30 us late, below the top
  // quantile's probability (7/8), so every quantile is 0.
  EXPECT_NEAR(n.windows[0].window_s, 50e-6, 1e-15);
  for (double d : n.windows[0].detour_s) EXPECT_NEAR(d, 0.0, 1e-15);
  // 4 quanta (sliding by 1): a quarter of the windows hold the detour: the top quantile (7/8).
  EXPECT_NEAR(n.windows[1].detour_s.back(), 30e-6, 1e-12);
  EXPECT_NEAR(n.windows[1].detour_s[1], 0.0, 1e-15);
  // 16 and 64 quanta: every window holds exactly 1 and 4 detours: their median includes them and
  // nothing is left around it.
  EXPECT_NEAR(n.windows[2].window_s, 16 * 50e-6 + 30e-6, 1e-12);
  EXPECT_NEAR(n.windows[3].window_s, 64 * 50e-6 + 120e-6, 1e-12);
  for (double d : n.windows[3].detour_s) EXPECT_NEAR(d, 0.0, 1e-12);
  // Quantiles ascend (the CostDb reader requires it).
  for (const NoiseWindow& w : n.windows) {
    for (size_t i = 1; i < w.detour_s.size(); ++i) EXPECT_LE(w.detour_s[i - 1], w.detour_s[i]);
  }
}

TEST(NoiseFromQuanta, TooFewQuantaMeasureNothing) {
  EXPECT_FALSE(NoiseFromQuanta(std::vector<double>(15, 1e-5), 8).measured());
}

}  // namespace
}  // namespace parallax::profiler
