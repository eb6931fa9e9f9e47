// calibrate --cluster-out: the measured device, planned without the CostDb, prices what was
// measured at what was measured (no second streaming fraction, no second sustained-clock scale).
#include <gtest/gtest.h>

#include <cmath>

#include "model/presets.h"
#include "planner/cost/compute.h"
#include "planner/cost/device_traits.h"
#include "profiler/calibrate/calibrate.h"

namespace parallax::profiler {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

CostDb Measured(double copy_GBps, double gemm_tflops) {
  CostDb db;
  db.device = "a100-sxm-80g";
  db.kernels.push_back({"elementwise", 64 << 20, (64 << 20) / (copy_GBps * 0.8e9), {}, "calibrate"});  // cache-fed
  db.kernels.push_back({"elementwise", kGiB, static_cast<double>(kGiB) / (copy_GBps * 1e9), {}, "calibrate"});
  GemmSample g;
  g.m = g.n = g.k = 8192;
  g.dtype = DType::kBf16;
  g.time_s = 2.0 * 8192.0 * 8192.0 * 8192.0 / (gemm_tflops * 1e12);
  db.gemms.push_back(g);
  return db;
}

TEST(MeasuredDevice, ACopyOfTheMeasuredSizeTakesTheMeasuredTime) {
  const DeviceSpec base = *DevicePreset("a100-sxm-80g");
  ASSERT_LT(base.arch.dram_fraction, 1.0);  // the preset's streaming fraction (0.88)
  const CostDb db = Measured(1700, 290);
  EXPECT_NEAR(StreamingBandwidthGBps(db), 1700, 1e-9);  // the largest copy, not the cached one
  const DeviceSpec d = MeasuredDevice(base, db);
  EXPECT_DOUBLE_EQ(d.hbm_GBps, 1700);
  EXPECT_DOUBLE_EQ(d.arch.dram_fraction, 1.0);
  const planner::ComputeModel cm(d, DType::kBf16);
  const double measured = static_cast<double>(kGiB) / 1700e9;
  // Within the launch overhead and the Little's-law latency term (both under 0.2% of 0.6 ms).
  EXPECT_NEAR(cm.RooflineMemory(static_cast<double>(kGiB)) / measured, 1.0, 0.01);
  // Before, the preset's 0.88 applied on top of the measured rate: 12% slow.
  DeviceSpec twice = d;
  twice.arch.dram_fraction = base.arch.dram_fraction;
  EXPECT_GT(planner::ComputeModel(twice, DType::kBf16).RooflineMemory(static_cast<double>(kGiB)) / measured, 1.1);
}

TEST(MeasuredDevice, AttentionFractionsKeepTheirRatioToStreaming) {
  const DeviceSpec base = *DevicePreset("a100-sxm-80g");
  const planner::DeviceTraits before = planner::TraitsFor(base);
  const planner::DeviceTraits after = planner::TraitsFor(MeasuredDevice(base, Measured(1700, 290)));
  ASSERT_GT(before.attention_fraction, 0);
  EXPECT_NEAR(after.attention_fraction / after.dram_fraction, before.attention_fraction / before.dram_fraction, 1e-12);
  EXPECT_NEAR(after.attention_bwd_fraction / after.dram_fraction,
              before.attention_bwd_fraction / before.dram_fraction, 1e-12);
}

TEST(MeasuredDevice, TheMeasuredGemmRateIsNotScaledDownAgain) {
  const DeviceSpec base = *DevicePreset("a100-sxm-80g");
  // A card faster than the preset's published sustained rate (271.2): the measured 290 is the
  // sustained rate now; the tile model loses only its own pipeline fill at the measured shape.
  const DeviceSpec d = MeasuredDevice(base, Measured(1700, 290));
  EXPECT_DOUBLE_EQ(d.peak_tflops.bf16, 290);
  EXPECT_DOUBLE_EQ(d.arch.sustained_matmul_tflops, 290);
  const double t = planner::ComputeModel(d, DType::kBf16).RooflineGemm(8192, 8192, 8192);
  const double tflops = 2.0 * 8192.0 * 8192.0 * 8192.0 / t / 1e12;
  EXPECT_GT(tflops, 0.93 * 290);
  EXPECT_LE(tflops, 290 * 1.0001);
  // Keeping the published 271.2 against a measured 290 peak priced it below the measurement.
  DeviceSpec kept = d;
  kept.arch.sustained_matmul_tflops = base.arch.sustained_matmul_tflops;
  EXPECT_GT(planner::ComputeModel(kept, DType::kBf16).RooflineGemm(8192, 8192, 8192), t * 1.01);
}

TEST(MeasuredDevice, NothingMeasuredLeavesTheBaseAlone) {
  const DeviceSpec base = *DevicePreset("a100-sxm-80g");
  CostDb empty;
  const DeviceSpec d = MeasuredDevice(base, empty);
  EXPECT_EQ(DeviceToJson(d).dump(), DeviceToJson(base).dump());
}

}  // namespace
}  // namespace parallax::profiler
