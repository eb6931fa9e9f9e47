// The cost model with measured costs (CostDb): a query at a measured shape costs what was
// measured; between measured shapes the measured/roofline ratio is interpolated in log space;
// collectives follow measured bus-bandwidth curves. Expected values are computed here from the
// definitions, independently of the interpolation code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "model/load.h"
#include "model/presets.h"
#include "planner/cost/collective.h"
#include "planner/cost/compute.h"
#include "planner/cost/placement.h"
#include "planner/estimate/step_estimate.h"

namespace parallax::planner {
namespace {

const DeviceSpec& A100() {
  static const DeviceSpec d = *DevicePreset("a100-sxm-80g");
  return d;
}

// A smooth, non-separable "measured slowdown" over the roofline, known in closed form.
double Slowdown(int64_t m, int64_t n, int64_t k) {
  return 1.1 + 0.05 * std::log2(static_cast<double>(m) / 512) - 0.02 * std::log2(static_cast<double>(n) / 512) +
         0.03 * std::log2(static_cast<double>(k) / 512);
}

CostDb GridDb(double scale = 1.0) {
  const ComputeModel roof(A100(), DType::kBf16);
  CostDb db;
  db.device = A100().name;
  for (int64_t m : {512, 2048, 8192}) {
    for (int64_t n : {512, 4096}) {
      for (int64_t k : {512, 2048, 16384}) {
        GemmSample g;
        g.m = m;
        g.n = n;
        g.k = k;
        g.dtype = DType::kBf16;
        g.time_s = roof.RooflineGemm(m, n, k) * Slowdown(m, n, k) * scale;
        db.gemms.push_back(g);
      }
    }
  }
  return db;
}

TEST(CostDbGemm, MeasuredShapesCostExactlyTheirMeasurement) {
  const CostDb db = GridDb();
  const ComputeModel c(A100(), DType::kBf16, &db);
  for (const auto& g : db.gemms) {
    EXPECT_NEAR(c.Gemm(g.m, g.n, g.k) / g.time_s, 1.0, 1e-9) << g.m << "x" << g.n << "x" << g.k;
  }
}

TEST(CostDbGemm, BetweenShapesTheRatioIsLinearInLogSpace) {
  const CostDb db = GridDb();
  const ComputeModel c(A100(), DType::kBf16, &db);
  // m = 1024 sits halfway (in log m) between 512 and 2048: the log ratio is the mean of the two.
  const double expect_ratio = std::sqrt(Slowdown(512, 4096, 2048) * Slowdown(2048, 4096, 2048));
  EXPECT_NEAR(c.Gemm(1024, 4096, 2048) / c.RooflineGemm(1024, 4096, 2048), expect_ratio, 1e-9);
  // A quarter of the way from k=2048 to 16384 in log k (2048 * 8^0.25 = 3444 rounded to 3444).
  const double fk = std::log(3444.0 / 2048) / std::log(8.0);
  const double r_lo = std::log(Slowdown(8192, 512, 2048)), r_hi = std::log(Slowdown(8192, 512, 16384));
  EXPECT_NEAR(c.Gemm(8192, 512, 3444) / c.RooflineGemm(8192, 512, 3444), std::exp(r_lo + fk * (r_hi - r_lo)), 1e-9);
  // The interpolated time keeps the roofline's wave quantization: times differ from a pure
  // TFLOP/s interpolation, but the ratio to the roofline is smooth.
  EXPECT_GT(c.Gemm(1024, 4096, 2048), c.RooflineGemm(1024, 4096, 2048));
}

TEST(CostDbGemm, OutsideTheGridTheEdgeRatioHoldsAndBatchFollowsTheRoofline) {
  const CostDb db = GridDb();
  const ComputeModel c(A100(), DType::kBf16, &db);
  EXPECT_NEAR(c.Gemm(65536, 4096, 16384) / c.RooflineGemm(65536, 4096, 16384), Slowdown(8192, 4096, 16384), 1e-9);
  EXPECT_NEAR(c.Gemm(64, 256, 128) / c.RooflineGemm(64, 256, 128), Slowdown(512, 512, 512), 1e-9);
  // Batched queries against unbatched samples: the batch axis has one value, the ratio is the
  // shape's, the roofline carries the batch (wave count), so 8 batches cost >= 1 batch.
  EXPECT_NEAR(c.Gemm(2048, 512, 512, 8) / c.RooflineGemm(2048, 512, 512, 8), Slowdown(2048, 512, 512), 1e-9);
  EXPECT_GT(c.Gemm(2048, 512, 512, 8), c.Gemm(2048, 512, 512, 1));
}

TEST(CostDbGemm, SamplesEqualToTheRooflineReproduceTheRooflinePlan) {
  // A database whose measurements equal the roofline must predict exactly what no database does;
  // one twice as slow must predict a longer step.
  const ComputeModel roof(A100(), DType::kBf16);
  CostDb same = GridDb();
  for (auto& g : same.gemms) g.time_s = roof.RooflineGemm(g.m, g.n, g.k);
  CostDb slow = same;
  for (auto& g : slow.gemms) g.time_s *= 2;
  Plan plan;
  plan.model = *ModelPreset("gpt-1.3b");
  plan.cluster = *ResolveCluster("dgx-a100", 1);
  plan.training.precision = Precision::kBf16;
  plan.layout.dp = 4;
  plan.layout.tp = 2;
  plan.layout.micro_batch = 2;
  plan.layout.global_batch = 64;
  auto base = Estimate(plan);
  auto with_same = Estimate(plan, &same);
  auto with_slow = Estimate(plan, &slow);
  ASSERT_TRUE(base && with_same && with_slow);
  EXPECT_NEAR(with_same->step_time_s / base->step_time_s, 1.0, 1e-9);
  EXPECT_GT(with_slow->step_time_s, 1.5 * base->step_time_s);
  EXPECT_LT(with_slow->step_time_s, 2.0 * base->step_time_s);  // comm and memory-bound ops did not slow
}

TEST(CostDbGemm, ScatteredSamplesAreExactAtSamplesAndBoundedBetween) {
  const ComputeModel roof(A100(), DType::kBf16);
  CostDb db;
  db.device = A100().name;
  const int64_t shapes[3][3] = {{1024, 1024, 1024}, {4096, 2048, 8192}, {2048, 8192, 512}};
  const double ratios[3] = {1.3, 1.1, 1.6};
  for (int i = 0; i < 3; ++i) {
    GemmSample g;
    g.m = shapes[i][0];
    g.n = shapes[i][1];
    g.k = shapes[i][2];
    g.time_s = roof.RooflineGemm(g.m, g.n, g.k) * ratios[i];
    db.gemms.push_back(g);
  }
  const ComputeModel c(A100(), DType::kBf16, &db);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(c.Gemm(shapes[i][0], shapes[i][1], shapes[i][2]) / db.gemms[static_cast<size_t>(i)].time_s, 1.0, 1e-9);
  }
  const double r = c.Gemm(3000, 3000, 3000) / c.RooflineGemm(3000, 3000, 3000);
  EXPECT_GT(r, 1.1);
  EXPECT_LT(r, 1.6);
  // Samples of another dtype are ignored.
  const ComputeModel fp16(A100(), DType::kFp16, &db);
  EXPECT_DOUBLE_EQ(fp16.Gemm(1024, 1024, 1024), fp16.RooflineGemm(1024, 1024, 1024));
}

TEST(CostDbMemory, FamiliesInterpolateInLogBytesAndFallBack) {
  CostDb db;
  db.device = A100().name;
  const ComputeModel roof(A100(), DType::kBf16);
  const double small = 1 << 20, large = 64.0 * (1 << 20);
  db.kernels.push_back({"attn_norm", static_cast<int64_t>(small), roof.RooflineMemory(small) * 2.0});
  db.kernels.push_back({"attn_norm", static_cast<int64_t>(large), roof.RooflineMemory(large) * 1.25});
  const ComputeModel c(A100(), DType::kBf16, &db);
  const double mid = 8.0 * (1 << 20);  // halfway between 1 MiB and 64 MiB in log bytes
  EXPECT_NEAR(c.MemoryBound("attn_norm", mid) / roof.RooflineMemory(mid), std::sqrt(2.0 * 1.25), 1e-9);
  EXPECT_NEAR(c.MemoryBound("attn_norm", 1e12) / roof.RooflineMemory(1e12), 1.25, 1e-9);
  EXPECT_NEAR(c.MemoryBound("attn_norm", 1e3) / roof.RooflineMemory(1e3), 2.0, 1e-9);
  // No samples of its own and no "elementwise" family: the roofline.
  EXPECT_DOUBLE_EQ(c.MemoryBound("act", mid), roof.RooflineMemory(mid));
  db.kernels.push_back({"elementwise", static_cast<int64_t>(mid), roof.RooflineMemory(mid) * 1.4});
  const ComputeModel with_generic(A100(), DType::kBf16, &db);
  EXPECT_NEAR(with_generic.MemoryBound("act", mid) / roof.RooflineMemory(mid), 1.4, 1e-9);
}

TEST(CostDbRunFactors, ScaleCalibratedSamplesAndLeaveTraceSamples) {
  CostDb db = GridDb();
  const ComputeModel before(A100(), DType::kBf16, &db);
  const ComputeModel roof(A100(), DType::kBf16);
  const double bytes = 1 << 20;
  db.kernels.push_back({"act", static_cast<int64_t>(bytes), roof.RooflineMemory(bytes) * 2.0, {}, "calibrate"});
  db.kernels.push_back({"act", static_cast<int64_t>(64 * bytes), roof.RooflineMemory(64 * bytes) * 1.5, {}, "refine"});
  db.run_factors.push_back({"gemm", DType::kBf16, 1.2, 3, "refine"});
  db.run_factors.push_back({"act", DType::kFp32, 1.1, 2, "refine"});
  db.run_factors.push_back({"gemm", DType::kFp16, 3.0, 1, "refine"});  // another dtype: not these GEMMs
  const ComputeModel c(A100(), DType::kBf16, &db);
  // Calibrated GEMMs (no source counts as calibrated) run 1.2x longer everywhere, between samples too.
  EXPECT_NEAR(c.Gemm(2048, 4096, 2048) / before.Gemm(2048, 4096, 2048), 1.2, 1e-9);
  EXPECT_NEAR(c.Gemm(1000, 700, 3000) / before.Gemm(1000, 700, 3000), 1.2, 1e-9);
  // A calibrated kernel point is scaled, a point refine took from a trace is not.
  EXPECT_NEAR(c.MemoryBound("act", bytes) / roof.RooflineMemory(bytes), 2.0 * 1.1, 1e-9);
  EXPECT_NEAR(c.MemoryBound("act", 64 * bytes) / roof.RooflineMemory(64 * bytes), 1.5, 1e-9);
  // A refine GEMM sample is exact at its shape.
  db.gemms[0].source = "refine";
  const ComputeModel mixed(A100(), DType::kBf16, &db);
  EXPECT_NEAR(mixed.Gemm(db.gemms[0].m, db.gemms[0].n, db.gemms[0].k) / db.gemms[0].time_s, 1.0, 1e-9);
  EXPECT_NEAR(mixed.Gemm(db.gemms[1].m, db.gemms[1].n, db.gemms[1].k) / db.gemms[1].time_s, 1.2, 1e-9);
}

// A weight gradient added into an fp32 buffer (GemmShape::accumulate) is its own kind of GEMM: its
// epilogue reads and writes 4-byte C, and on the GPU it ran 11-29% slower than plain GEMMs of equal
// work (data/calibration/h200-2026-11-26: 8192x2048x2048 accumulating 115.8 us against 2048x8192x2048
// plain 91.3 us). Its samples correct accumulating queries only; a plain grid corrects both when no
// accumulating sample exists, and accumulating samples alone carry to plain queries.
TEST(CostDbAccumulate, WeightGradientSamplesCorrectTheirOwnKind) {
  const ComputeModel roof(A100(), DType::kBf16);
  // Roofline: four more bytes per output element read and written; shows where C dominates.
  EXPECT_GT(roof.RooflineGemm(8192, 8192, 64, 1, true), roof.RooflineGemm(8192, 8192, 64));
  EXPECT_GE(roof.RooflineGemm(4096, 4096, 4096, 1, true), roof.RooflineGemm(4096, 4096, 4096));
  const ComputeModel fp32_roof(*DevicePreset("cpu"), DType::kFp32);  // fp32 C: the read is what is added
  EXPECT_GT(fp32_roof.RooflineGemm(8192, 8192, 1, 1, true), fp32_roof.RooflineGemm(8192, 8192, 1));

  CostDb db = GridDb();
  const ComputeModel plain_only(A100(), DType::kBf16, &db);
  // No accumulating sample: the plain grid's ratio over the accumulating roofline.
  EXPECT_NEAR(plain_only.Gemm(2048, 4096, 2048, 1, true) / roof.RooflineGemm(2048, 4096, 2048, 1, true),
              plain_only.Gemm(2048, 4096, 2048) / roof.RooflineGemm(2048, 4096, 2048), 1e-9);

  // Two accumulating samples, 1.3x and 1.5x their roofline; one at a shape the grid also has.
  GemmSample a;
  a.m = 2048;
  a.n = 4096;
  a.k = 2048;
  a.accumulate = true;
  a.source = "refine";
  a.time_s = 1.3 * roof.RooflineGemm(a.m, a.n, a.k, 1, true);
  db.gemms.push_back(a);
  GemmSample b = a;
  b.m = 8192;
  b.time_s = 1.5 * roof.RooflineGemm(b.m, b.n, b.k, 1, true);
  db.gemms.push_back(b);
  const ComputeModel c(A100(), DType::kBf16, &db);
  EXPECT_NEAR(c.Gemm(a.m, a.n, a.k, 1, true) / a.time_s, 1.0, 1e-9);
  EXPECT_NEAR(c.Gemm(b.m, b.n, b.k, 1, true) / b.time_s, 1.0, 1e-9);
  // The plain query at the same shape still reads the plain grid (the full grid survives the
  // extra samples), untouched by the accumulating ones.
  EXPECT_NEAR(c.Gemm(2048, 4096, 2048) / plain_only.Gemm(2048, 4096, 2048), 1.0, 1e-9);
  EXPECT_NEAR(c.Gemm(1000, 700, 3000) / plain_only.Gemm(1000, 700, 3000), 1.0, 1e-9);
  // Between accumulating samples: inverse-square-distance weighting in log space (equal distances
  // in log m from 4096: the mean of the two log ratios).
  EXPECT_NEAR(c.Gemm(4096, 4096, 2048, 1, true) / roof.RooflineGemm(4096, 4096, 2048, 1, true),
              std::exp(0.5 * (std::log(1.3) + std::log(1.5))), 1e-9);

  // Accumulating samples alone: their ratio carries to plain queries.
  CostDb only;
  only.device = A100().name;
  only.gemms = {a, b};
  const ComputeModel acc_only(A100(), DType::kBf16, &only);
  EXPECT_NEAR(acc_only.Gemm(a.m, a.n, a.k) / roof.RooflineGemm(a.m, a.n, a.k), 1.3, 1e-9);
}

// The Hopper figure accumulate_epilogue_fraction (model/presets.cpp) against the measurement it
// comes from: GPT-1.3B's weight-gradient GEMMs (dW += dY^T X into fp32, beta 1) on one H200 against
// the plain GEMM of the same work, the transposed shape, in the calibration of 2026-11-26
// (data/calibration/h200-2026-11-26). The roofline's accumulating / plain ratio of each pair is
// within 10% of the measured ratio (1.27, 1.29, 1.11), where without the figure it was 1.00.
TEST(CostDbAccumulate, HopperEpilogueFigureAgainstTheH200Calibration) {
  auto db = LoadCostDbFile(std::string(PARALLAX_SOURCE_DIR) + "/data/calibration/h200-2026-11-26/costdb-gpt-1.3b.json");
  ASSERT_TRUE(db) << db.error().message;
  const DeviceSpec h200 = *DevicePreset("h200-sxm-141g");
  ASSERT_GT(h200.arch.accumulate_epilogue_fraction, 0.0);
  const ComputeModel roof(h200, DType::kBf16);
  auto measured = [&](int64_t m, int64_t n, int64_t k) {
    for (const GemmSample& g : db->gemms) {
      if (g.dtype == DType::kBf16 && g.m == m && g.n == n && g.k == k) return g.time_s;
    }
    ADD_FAILURE() << "no sample " << m << "x" << n << "x" << k;
    return 1.0;
  };
  int pairs = 0;
  for (int64_t rows : {int64_t{8192}, int64_t{6144}, int64_t{51200}}) {  // fc1, qkv, lm_head weights
    const double meas = measured(rows, 2048, 2048) / measured(2048, rows, 2048);
    const double model = roof.RooflineGemm(rows, 2048, 2048, 1, true) / roof.RooflineGemm(2048, rows, 2048);
    std::printf("%6lld x 2048 x 2048: accumulating / plain measured %.3f, model %.3f\n", static_cast<long long>(rows),
                meas, model);
    EXPECT_GT(meas, 1.1);
    EXPECT_NEAR(model / meas, 1.0, 0.10) << rows;
    ++pairs;
  }
  EXPECT_EQ(pairs, 3);
  // The figure round-trips through the device JSON; a value outside [0, 1] names its path.
  Json j = DeviceToJson(h200);
  EXPECT_DOUBLE_EQ(j["microarch"]["accumulate_epilogue_fraction"].get<double>(), h200.arch.accumulate_epilogue_fraction);
  j["microarch"]["accumulate_epilogue_fraction"] = 0.5;
  auto back = DeviceFromJson(j, "device.json", "/device");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_DOUBLE_EQ(back->arch.accumulate_epilogue_fraction, 0.5);
  j["microarch"]["accumulate_epilogue_fraction"] = 1.5;
  auto bad = DeviceFromJson(j, "device.json", "/device");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/device/microarch/accumulate_epilogue_fraction"), std::string::npos)
      << bad.error().message;
  EXPECT_DOUBLE_EQ(DevicePreset("a100-sxm-80g")->arch.accumulate_epilogue_fraction, 0.0);  // not measured
}

CollectiveCurve AllReduce8(double busbw_small_GBps, double busbw_large_GBps) {
  CollectiveCurve c;
  c.op = CollectiveKind::kAllReduce;
  c.group_size = 8;
  const double f = CollectiveModel::BusFactor(CollectiveKind::kAllReduce, 8);
  for (auto [bytes, bw] : {std::pair<double, double>{1 << 20, busbw_small_GBps}, {1 << 30, busbw_large_GBps}}) {
    CollectivePoint p;
    p.bytes = static_cast<int64_t>(bytes);
    p.time_s = bytes * f / (bw * 1e9);
    c.points.push_back(p);
  }
  return c;
}

TEST(CostDbCollective, BusBandwidthCurvesInterpolateAndTransferToOtherGroupSizes) {
  const ClusterSpec cluster = *ResolveCluster("dgx-a100", 1);
  CostDb db;
  db.device = cluster.device.name;
  db.collectives.push_back(AllReduce8(50, 200));
  const CollectiveModel model(cluster, &db);
  PlacedGroup g8;
  g8.size = 8;
  g8.ranks_per_node = 8;
  g8.gpus_per_node = 8;
  const double f8 = CollectiveModel::BusFactor(CollectiveKind::kAllReduce, 8);
  // At the measured sizes: the measured times.
  EXPECT_NEAR(model.Time(CollectiveKind::kAllReduce, 1 << 30, g8), db.collectives[0].points[1].time_s, 1e-12);
  // Halfway in log bytes (32 MiB): busbw is the geometric mean, 100 GB/s.
  const double b = 32.0 * (1 << 20);
  EXPECT_NEAR(model.Time(CollectiveKind::kAllReduce, b, g8), b * f8 / 100e9, 1e-12);
  // Beyond the largest: the largest busbw. Below the smallest: its time is a floor.
  EXPECT_NEAR(model.Time(CollectiveKind::kAllReduce, 4.0 * (1 << 30), g8), 4.0 * (1 << 30) * f8 / 200e9, 1e-12);
  EXPECT_NEAR(model.Time(CollectiveKind::kAllReduce, 1024, g8), db.collectives[0].points[0].time_s, 1e-15);
  // A 4-rank group with only the 8-rank curve: same busbw, the 4-rank bus factor.
  PlacedGroup g4 = g8;
  g4.size = 4;
  g4.ranks_per_node = 4;
  const double f4 = CollectiveModel::BusFactor(CollectiveKind::kAllReduce, 4);
  EXPECT_NEAR(model.Time(CollectiveKind::kAllReduce, 1 << 30, g4), (1 << 30) * f4 / 200e9, 1e-12);
  // Another op, or a group spanning nodes, has no curve: the link model.
  const CollectiveModel link(cluster);
  EXPECT_DOUBLE_EQ(model.Time(CollectiveKind::kAllGather, 1 << 30, g8), link.Time(CollectiveKind::kAllGather, 1 << 30, g8));
}

TEST(CostDbJson, BatchedGemmSamplesRoundTripAndBadBatchNamesThePath) {
  Json j = {{"kind", "costdb"},
            {"version", 1},
            {"device", "a100-sxm-80g"},
            {"gemm", Json::array({{{"m", 2048}, {"n", 2048}, {"k", 128}, {"batch", 96}, {"dtype", "fp16"}, {"time_s", 1e-3}}})}};
  auto db = CostDbFromJson(j, "db.json");
  ASSERT_TRUE(db) << db.error().message;
  EXPECT_EQ(db->gemms[0].batch, 96);
  EXPECT_NEAR(db->gemms[0].tflops(), 2.0 * 2048 * 2048 * 128 * 96 / 1e-3 / 1e12, 1e-6);
  auto again = CostDbFromJson(CostDbToJson(*db), "again.json");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->gemms[0].batch, 96);
  j["gemm"][0]["batch"] = 0;
  auto bad = CostDbFromJson(j, "db.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("db.json: /gemm/0/batch"), std::string::npos) << bad.error().message;
}

// The unfused attention core's passes over the s x s scores (ComputeModel::ScoreGemm, ScoreMemory):
// on the roofline they move at the device's unfused-attention fractions of HBM bandwidth (A100:
// the GEMMs and the forward passes 0.68, the backward passes 0.53) instead of a copy's 0.88. A
// database's measured ratios apply over these rooflines: a batched sample is exact at its shape
// and moves nothing far from it, a batch-1 sample's ratio carries over, the op's own family is
// exact, the streaming curve's ratio carries over; samples equal to the roofline change nothing.
TEST(UnfusedAttentionPasses, MoveAtTheDeviceAttentionFractionUntilMeasured) {
  const Microarch& arch = A100().arch;
  ASSERT_GT(arch.unfused_attention_fraction, 0);
  ASSERT_GT(arch.unfused_attention_bwd_fraction, 0);
  const ComputeModel roof(A100(), DType::kFp16);
  const double bytes = 4e9;  // large: the latency and launch terms are below 0.1%
  EXPECT_NEAR(roof.ScoreMemory("attn_core", bytes, false) / roof.RooflineMemory(bytes),
              arch.dram_fraction / arch.unfused_attention_fraction, 1e-3);
  EXPECT_NEAR(roof.ScoreMemory("attn_core_bwd", bytes, true) / roof.RooflineMemory(bytes),
              arch.dram_fraction / arch.unfused_attention_bwd_fraction, 1e-3);
  // QK^T of 128 heads at seq 2048, head dim 64: writing the scores bounds it, at the fraction.
  const int64_t s = 2048, d = 64, heads = 128;
  const double write_s = 2.0 * s * s * heads / (A100().hbm_GBps * 1e9);
  EXPECT_GT(roof.ScoreGemm(s, s, d, heads), write_s / arch.unfused_attention_fraction);
  EXPECT_GT(roof.ScoreGemm(s, s, d, heads), roof.Gemm(s, s, d, heads));
  // A device without the figure (no microarch: the CPU) prices the passes as any memory pass.
  const ComputeModel cpu(*DevicePreset("cpu"), DType::kFp32);
  EXPECT_DOUBLE_EQ(cpu.ScoreMemory("attn_core", bytes, false), cpu.RooflineMemory(bytes));
  EXPECT_DOUBLE_EQ(cpu.ScoreGemm(s, s, d, heads), cpu.Gemm(s, s, d, heads));

  // Samples of the linear layers' GEMMs (batch 1) give the score GEMM their interpolated ratio
  // over its own roofline, the ratio a GEMM of that shape gets over the GEMM roofline.
  const CostDb linear = GridDb(1.3);
  const ComputeModel with_linear(A100(), DType::kBf16, &linear);
  const ComputeModel roof16(A100(), DType::kBf16);
  EXPECT_NEAR(with_linear.ScoreGemm(s, s, d, heads) / roof16.ScoreGemm(s, s, d, heads),
              with_linear.Gemm(s, s, d, heads) / roof16.Gemm(s, s, d, heads), 1e-9);
  EXPECT_GT(with_linear.Gemm(s, s, d, heads) / roof16.Gemm(s, s, d, heads), 1.3);
  // A measured batched GEMM at the shape is what it costs (refine's samples re-predict exactly).
  CostDb batched = linear;
  batched.gemms.push_back({s, s, d, heads, DType::kBf16, 1.234e-3, {}, "calibrate"});
  const ComputeModel with_batched(A100(), DType::kBf16, &batched);
  EXPECT_NEAR(with_batched.ScoreGemm(s, s, d, heads), 1.234e-3, 1e-12);
  // A batched sample that ran at its score roofline, alone in the database, changes nothing:
  // it is a ratio of one like any other, not a switch off the figure.
  CostDb small;
  small.device = A100().name;
  small.gemms.push_back({64, 64, 64, 2, DType::kBf16, roof16.ScoreGemm(64, 64, 64, 2), {}, "refine"});
  const ComputeModel with_small(A100(), DType::kBf16, &small);
  EXPECT_NEAR(with_small.ScoreGemm(s, s, d, heads) / roof16.ScoreGemm(s, s, d, heads), 1.0, 1e-9);

  // Kernel families: the op's own measured curve prices the passes; the streaming curve's ratio
  // (here 2) carries over the passes' roofline.
  CostDb streaming;
  streaming.device = A100().name;
  streaming.kernels.push_back({"elementwise", 1 << 20, 2 * roof.RooflineMemory(1 << 20), {}, "calibrate"});
  streaming.kernels.push_back({"elementwise", 1 << 30, 2 * roof.RooflineMemory(1 << 30), {}, "calibrate"});
  const ComputeModel with_streaming(A100(), DType::kFp16, &streaming);
  EXPECT_NEAR(with_streaming.ScoreMemory("attn_core", 1 << 30, false) / roof.ScoreMemory("attn_core", 1 << 30, false),
              2.0, 1e-9);
  EXPECT_NEAR(with_streaming.ScoreMemory("attn_core_bwd", 1 << 30, true) / roof.ScoreMemory("attn_core_bwd", 1 << 30, true),
              2.0, 1e-9);
  CostDb same;  // a streaming curve equal to the roofline: the passes cost what no database says
  same.device = A100().name;
  same.kernels.push_back({"elementwise", 1 << 20, roof.RooflineMemory(1 << 20), {}, "calibrate"});
  same.kernels.push_back({"elementwise", 1 << 30, roof.RooflineMemory(1 << 30), {}, "calibrate"});
  const ComputeModel with_same(A100(), DType::kFp16, &same);
  EXPECT_NEAR(with_same.ScoreMemory("attn_core_bwd", 3e6, true) / roof.ScoreMemory("attn_core_bwd", 3e6, true), 1.0, 1e-12);
  CostDb own = streaming;
  own.kernels.push_back({"attn_core", 1 << 30, 5e-3, {}, "refine"});
  const ComputeModel with_own(A100(), DType::kFp16, &own);
  EXPECT_NEAR(with_own.ScoreMemory("attn_core", 1 << 30, false), 5e-3, 1e-12);
  // The backward family unmeasured: the forward family's ratio over the backward passes' roofline.
  EXPECT_NEAR(with_own.ScoreMemory("attn_core_bwd", 1 << 30, true),
              roof.ScoreMemory("attn_core_bwd", 1 << 30, true) * 5e-3 / roof.RooflineMemory(1 << 30), 1e-12);
}

TEST(UnfusedAttentionPasses, DeviceFiguresRoundTripAndAreBoundedByOne) {
  DeviceSpec d = A100();
  Json j = DeviceToJson(d);
  EXPECT_DOUBLE_EQ(j["microarch"]["unfused_attention_fraction"].get<double>(), d.arch.unfused_attention_fraction);
  auto again = DeviceFromJson(j, "device.json", "/device");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_DOUBLE_EQ(again->arch.unfused_attention_bwd_fraction, d.arch.unfused_attention_bwd_fraction);
  j["microarch"]["unfused_attention_bwd_fraction"] = 1.5;
  auto bad = DeviceFromJson(j, "device.json", "/device");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("device.json: /device/microarch/unfused_attention_bwd_fraction"),
            std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace parallax::planner
