// FP8 arithmetic (executor/fp8.h) and the CPU backend's FP8 kernels: every code of both formats,
// rounding ties, saturation, NaN, Transformer Engine's delayed-scaling update against a worked
// example, and the emulated FP8 GEMM against a double-precision sum of the same FP8 products.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "executor/fp8.h"

namespace parallax::executor {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::kE4M3, Fp8Format::kE5M2};

bool IsNanCode(uint8_t c, Fp8Format f) { return std::isnan(Fp8ToFloat(c, f)); }

TEST(Fp8Codes, EveryCodeDecodesAndEncodesBackToItself) {
  for (Fp8Format f : kFormats) {
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<uint8_t>(c);
      const float v = Fp8ToFloat(code, f);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(IsNanCode(FloatToFp8(v, f), f)) << ToString(f) << " code " << c;
      } else if (std::isinf(v)) {
        ++infs;  // E5M2 only: a saturating cast makes it the largest finite value
        EXPECT_EQ(FloatToFp8(v, f), (code & 0x80) | 0x7b) << c;
      } else {
        EXPECT_EQ(FloatToFp8(v, f), code) << ToString(f) << " code " << c << " value " << v;
      }
    }
    EXPECT_EQ(nans, f == Fp8Format::kE4M3 ? 2 : 6) << ToString(f);
    EXPECT_EQ(infs, f == Fp8Format::kE4M3 ? 0 : 2) << ToString(f);
  }
}

TEST(Fp8Codes, KnownCodesHaveTheSpecifiedValues) {
  // OCP OFP8 rev. 1.0, table 1.
  EXPECT_EQ(Fp8ToFloat(0x38, Fp8Format::kE4M3), 1.0f);
  EXPECT_EQ(Fp8ToFloat(0x7e, Fp8Format::kE4M3), 448.0f);
  EXPECT_EQ(Fp8ToFloat(0xfe, Fp8Format::kE4M3), -448.0f);
  EXPECT_EQ(Fp8ToFloat(0x08, Fp8Format::kE4M3), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(Fp8ToFloat(0x07, Fp8Format::kE4M3), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(Fp8ToFloat(0x01, Fp8Format::kE4M3), Fp8MinSubnormal(Fp8Format::kE4M3));
  EXPECT_EQ(Fp8ToFloat(0x3c, Fp8Format::kE5M2), 1.0f);
  EXPECT_EQ(Fp8ToFloat(0x7b, Fp8Format::kE5M2), 57344.0f);
  EXPECT_EQ(Fp8ToFloat(0x7c, Fp8Format::kE5M2), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Fp8ToFloat(0x04, Fp8Format::kE5M2), std::ldexp(1.0f, -14));
  EXPECT_EQ(Fp8ToFloat(0x01, Fp8Format::kE5M2), Fp8MinSubnormal(Fp8Format::kE5M2));
  EXPECT_TRUE(std::signbit(Fp8ToFloat(0x80, Fp8Format::kE4M3)));
  EXPECT_EQ(Fp8Max(Fp8Format::kE4M3), Fp8ToFloat(0x7e, Fp8Format::kE4M3));
  EXPECT_EQ(Fp8Max(Fp8Format::kE5M2), Fp8ToFloat(0x7b, Fp8Format::kE5M2));
}

TEST(Fp8Rounding, MidpointsRoundToTheEvenCodeAndNeighboursToTheNearest) {
  for (Fp8Format f : kFormats) {
    for (int c = 0; c < 0x7f; ++c) {
      const auto lo = static_cast<uint8_t>(c), hi = static_cast<uint8_t>(c + 1);
      const float v0 = Fp8ToFloat(lo, f), v1 = Fp8ToFloat(hi, f);
      if (!std::isfinite(v1)) break;
      const float mid = (v0 + v1) / 2;  // exact: one bit more than the format holds
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(v0) + v1) / 2);
      const uint8_t even = (lo & 1) == 0 ? lo : hi;
      EXPECT_EQ(FloatToFp8(mid, f), even) << ToString(f) << " between codes " << c << " and " << c + 1;
      EXPECT_EQ(FloatToFp8(-mid, f), even | 0x80) << ToString(f) << " " << c;
      EXPECT_EQ(FloatToFp8(std::nextafter(mid, 0.0f), f), lo) << ToString(f) << " " << c;
      EXPECT_EQ(FloatToFp8(std::nextafter(mid, 1e9f), f), hi) << ToString(f) << " " << c;
    }
  }
}

TEST(Fp8Rounding, TinyValuesRoundToZeroOrTheSmallestSubnormal) {
  for (Fp8Format f : kFormats) {
    const float half_min = Fp8MinSubnormal(f) / 2;
    EXPECT_EQ(FloatToFp8(half_min, f), 0x00) << ToString(f);  // tie: 0 is even
    EXPECT_EQ(FloatToFp8(-half_min, f), 0x80) << ToString(f);
    EXPECT_EQ(FloatToFp8(std::nextafter(half_min, 1.0f), f), 0x01) << ToString(f);
    EXPECT_EQ(FloatToFp8(1e-30f, f), 0x00) << ToString(f);
  }
}

TEST(Fp8Saturation, ValuesBeyondTheLargestFiniteOneSaturate) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, 3e38f, inf}) {
    EXPECT_EQ(FloatToFp8(v, Fp8Format::kE4M3), 0x7e) << v;
    EXPECT_EQ(FloatToFp8(-v, Fp8Format::kE4M3), 0xfe) << v;
  }
  for (float v : {57344.0f, 61440.0f, 65536.0f, 1e9f, inf}) {
    EXPECT_EQ(FloatToFp8(v, Fp8Format::kE5M2), 0x7b) << v;
    EXPECT_EQ(FloatToFp8(-v, Fp8Format::kE5M2), 0xfb) << v;
  }
  EXPECT_EQ(FloatToFp8(440.0f, Fp8Format::kE4M3), 0x7e);  // 416 < 440 < 448, nearer 448
}

TEST(Fp8Saturation, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Fp8Format f : kFormats) {
    EXPECT_EQ(FloatToFp8(nan, f) & 0x7f, kFp8NaN) << ToString(f);
    EXPECT_TRUE(std::isnan(Fp8ToFloat(FloatToFp8(nan, f), f))) << ToString(f);
    EXPECT_TRUE(std::isnan(Fp8ToFloat(FloatToFp8(-nan, f), f))) << ToString(f);
  }
}

TEST(Fp8Scale, ScaleMapsAmaxToTheFormatMaximumDividedByTwoToTheMargin) {
  EXPECT_EQ(Fp8ScaleFromAmax(2.0f, 1.0f, Fp8Format::kE4M3, 0), 224.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(2.0f, 1.0f, Fp8Format::kE4M3, 1), 112.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(2.0f, 1.0f, Fp8Format::kE5M2, 1), 14336.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(0.0f, 3.0f, Fp8Format::kE4M3, 0), 3.0f);  // no amax seen: keep
  EXPECT_EQ(Fp8ScaleFromAmax(std::numeric_limits<float>::infinity(), 3.0f, Fp8Format::kE4M3, 0), 3.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(std::numeric_limits<float>::quiet_NaN(), 3.0f, Fp8Format::kE4M3, 0), 3.0f);
  EXPECT_EQ(Fp8ScaleFromAmax(1e-45f, 1.0f, Fp8Format::kE5M2, 0), std::numeric_limits<float>::max());
}

// A backend tensor of fp32 values (or FP8 codes cast without a scale).
Tensor Upload(CpuBackend& be, const std::vector<float>& v, DType t = DType::kF32) {
  Tensor x = be.Allocate(static_cast<int64_t>(v.size()), t, MemoryKind::kWorkspace).value();
  be.CopyToDevice(x.ptr(), v.data(), DType::kF32, static_cast<int64_t>(v.size()));
  return x;
}

std::vector<float> Download(CpuBackend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.CopyToHost(v.data(), DType::kF32, t.ptr(), t.numel());
  return v;
}

TEST(Fp8DelayedScaling, UpdateFollowsAHandWorkedHistory) {
  // Two E4M3 tensors, history of 3 steps, margin 0. Tensor 0's amaxes 2, 8, 1, 0.5, 0.25:
  //   step 1 window {2,0,0}: 448/2 = 224; step 2 {8,0,2}: 56; step 3 {1,2,8}: 56;
  //   step 4 {0.5,8,1}: 56; step 5 {0.25,1,0.5} (8 has left the window): 448.
  // Tensor 1 sees amax 0 throughout and keeps its scale of 1.
  CpuBackend be;
  const DelayedScaling recipe{.margin = 0, .amax_history_len = 3, .amax_algo = AmaxAlgo::kMax};
  Tensor history = be.AllocateZeroed(6, DType::kF32, MemoryKind::kWorkspace).value();
  Tensor scale = Upload(be, {1, 1}), scale_inv = Upload(be, {1, 1});
  const float amaxes[] = {2, 8, 1, 0.5f, 0.25f};
  const float expected[] = {224, 56, 56, 56, 448};
  for (int step = 0; step < 5; ++step) {
    be.Fill(history.ptr(), 1, amaxes[step]);  // row 0, tensor 0
    be.Fp8ScaleUpdate({.amax_history = history.ptr(), .scale = scale.ptr(), .scale_inv = scale_inv.ptr(),
                       .count = 2, .format = Fp8Format::kE4M3, .recipe = recipe});
    const auto s = Download(be, scale), si = Download(be, scale_inv), h = Download(be, history);
    EXPECT_EQ(s[0], expected[step]) << "step " << step + 1;
    EXPECT_EQ(si[0], 1.0f / expected[step]) << "step " << step + 1;
    EXPECT_EQ(s[1], 1.0f) << "step " << step + 1;
    EXPECT_EQ(h[0], 0.0f) << "row 0 is zeroed for the next step";
    EXPECT_EQ(h[4], amaxes[step]) << "this step's amax is the newest row";
  }
  ASSERT_TRUE(be.Synchronize());
}

TEST(Fp8DelayedScaling, MostRecentUsesOnlyThisStepsAmax) {
  CpuBackend be;
  const DelayedScaling recipe{.margin = 0, .amax_history_len = 3, .amax_algo = AmaxAlgo::kMostRecent};
  Tensor history = be.AllocateZeroed(3, DType::kF32, MemoryKind::kWorkspace).value();
  Tensor scale = Upload(be, {1}), scale_inv = Upload(be, {1});
  const float amaxes[] = {2, 8, 1, 0.5f};
  const float expected[] = {28672, 7168, 57344, 114688};  // E5M2: 57344 / amax
  for (int step = 0; step < 4; ++step) {
    be.Fill(history.ptr(), 1, amaxes[step]);
    be.Fp8ScaleUpdate({.amax_history = history.ptr(), .scale = scale.ptr(), .scale_inv = scale_inv.ptr(),
                       .count = 1, .format = Fp8Format::kE5M2, .recipe = recipe});
    EXPECT_EQ(Download(be, scale)[0], expected[step]) << "step " << step + 1;
  }
}

TEST(Fp8Cast, CastScalesSaturatesAndAccumulatesTheAmaxOfTheUnscaledInput) {
  CpuBackend be;
  Tensor x = Upload(be, {1.0f, -3.0f, 0.5f, 300.0f}), scale = Upload(be, {2.0f}), amax = Upload(be, {50.0f});
  Tensor y = be.Allocate(4, DType::kE4M3, MemoryKind::kWorkspace).value();
  be.Fp8Cast({.x = x.ptr(), .scale = scale.ptr(), .y = y.ptr(), .amax = amax.ptr(), .n = 4});
  EXPECT_EQ(Download(be, y), (std::vector<float>{2.0f, -6.0f, 1.0f, 448.0f}));  // 600 saturates
  EXPECT_EQ(Download(be, amax)[0], 300.0f);
  Tensor z = Upload(be, {1.0f, std::numeric_limits<float>::quiet_NaN()});
  be.Fp8Cast({.x = z.ptr(), .scale = scale.ptr(), .y = y.ptr(), .amax = amax.ptr(), .n = 2});
  EXPECT_TRUE(std::isnan(Download(be, amax)[0])) << "a NaN input makes the amax NaN, so the scale is kept";
  ASSERT_TRUE(be.Synchronize());
}

TEST(Fp8Cast, AScaleFromTheAmaxUsesTheWholeRange) {
  CpuBackend be;
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(1000);
  float amax = 0;
  for (auto& x : v) amax = std::max(amax, std::fabs(x = d(rng)));
  Tensor x = Upload(be, v), scale = Upload(be, {Fp8ScaleFromAmax(amax, 1.0f, Fp8Format::kE4M3, 0)});
  Tensor y = be.Allocate(1000, DType::kE4M3, MemoryKind::kWorkspace).value();
  be.Fp8Cast({.x = x.ptr(), .scale = scale.ptr(), .y = y.ptr(), .n = 1000});
  float top = 0;
  double worst = 0;
  const auto codes = Download(be, y);
  const float s = Download(be, scale)[0];
  for (size_t i = 0; i < v.size(); ++i) {
    top = std::max(top, std::fabs(codes[i]));
    if (std::fabs(v[i]) > amax / 64) worst = std::max(worst, std::fabs(static_cast<double>(codes[i]) / s / v[i] - 1));
  }
  EXPECT_EQ(top, 448.0f);
  EXPECT_LE(worst, 1.0 / 16);  // E4M3: 3 mantissa bits, half an ulp is 2^-4 relative
}

struct GemmCase {
  Trans ta, tb;
  DType a, b, c;
};

class Fp8GemmTest : public ::testing::TestWithParam<GemmCase> {};

// FP8 A and B (codes and dequantization factors), the backend's result and a double-precision sum
// of the same products.
TEST_P(Fp8GemmTest, MatchesADoublePrecisionSumOfTheSameFp8Products) {
  const GemmCase gc = GetParam();
  const int64_t m = 37, n = 29, k = 96;
  const float alpha = 0.75f, beta = 0.5f;
  CpuBackend be;
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 2.0f);
  auto random = [&](int64_t len) {
    std::vector<float> v(static_cast<size_t>(len));
    for (auto& x : v) x = d(rng);
    return v;
  };
  const std::vector<float> a32 = random(m * k), b32 = random(k * n), c0 = random(m * n);
  // Scales as a delayed-scaling step would hold them: not powers of two.
  Tensor a_in = Upload(be, a32), b_in = Upload(be, b32), c = Upload(be, c0, gc.c);
  Tensor a_scale = Upload(be, {37.3f}), b_scale = Upload(be, {gc.b == DType::kE5M2 ? 3011.7f : 41.9f});
  Tensor a_inv = Upload(be, {1 / 37.3f}), b_inv = Upload(be, {gc.b == DType::kE5M2 ? 1 / 3011.7f : 1 / 41.9f});
  Tensor a = be.Allocate(m * k, gc.a, MemoryKind::kWorkspace).value();
  Tensor b = be.Allocate(k * n, gc.b, MemoryKind::kWorkspace).value();
  be.Fp8Cast({.x = a_in.ptr(), .scale = a_scale.ptr(), .y = a.ptr(), .n = m * k});
  be.Fp8Cast({.x = b_in.ptr(), .scale = b_scale.ptr(), .y = b.ptr(), .n = k * n});
  const int64_t lda = gc.ta == Trans::kYes ? m : k, ldb = gc.tb == Trans::kYes ? k : n;
  be.Fp8Gemm({.ta = gc.ta, .tb = gc.tb, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta, .a = a.ptr(),
              .b = b.ptr(), .c = c.ptr(), .a_scale_inv = a_inv.ptr(), .b_scale_inv = b_inv.ptr(), .lda = lda,
              .ldb = ldb, .ldc = n});
  ASSERT_TRUE(be.Synchronize());

  const auto a8 = Download(be, a), b8 = Download(be, b), c_start = Download(be, Upload(be, c0, gc.c));
  const double sa = Download(be, a_inv)[0], sb = Download(be, b_inv)[0];
  const auto out = Download(be, c);
  double err = 0, norm = 0, worst_rounding = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = a8[static_cast<size_t>(gc.ta == Trans::kYes ? p * lda + i : i * lda + p)];
        const double bv = b8[static_cast<size_t>(gc.tb == Trans::kYes ? j * ldb + p : p * ldb + j)];
        sum += av * bv;
      }
      const double ref = alpha * sa * sb * sum + beta * c_start[static_cast<size_t>(i * n + j)];
      const double got = out[static_cast<size_t>(i * n + j)];
      err += (got - ref) * (got - ref);
      norm += ref * ref;
      worst_rounding = std::max(worst_rounding, std::fabs(got - ref) / std::max(std::fabs(ref), 1e-3));
    }
  }
  if (gc.c == DType::kF32) {
    EXPECT_LE(std::sqrt(err / norm), 1e-6) << "fp32 accumulation against the double sum";
  } else {
    EXPECT_LE(worst_rounding, gc.c == DType::kBf16 ? 1.0 / 256 : 1.0 / 1024) << "one rounding of the output";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Fp8GemmTest,
    ::testing::Values(GemmCase{Trans::kNo, Trans::kYes, DType::kE4M3, DType::kE4M3, DType::kF32},
                      GemmCase{Trans::kNo, Trans::kNo, DType::kE5M2, DType::kE4M3, DType::kF32},
                      GemmCase{Trans::kYes, Trans::kNo, DType::kE5M2, DType::kE4M3, DType::kF32},
                      GemmCase{Trans::kYes, Trans::kYes, DType::kE4M3, DType::kE5M2, DType::kF32},
                      GemmCase{Trans::kNo, Trans::kYes, DType::kE4M3, DType::kE4M3, DType::kBf16},
                      GemmCase{Trans::kNo, Trans::kNo, DType::kE4M3, DType::kE5M2, DType::kF16}),
    [](const ::testing::TestParamInfo<GemmCase>& param) {
      const GemmCase& g = param.param;
      return std::string(g.ta == Trans::kYes ? "T" : "N") + (g.tb == Trans::kYes ? "T" : "N") + "_" +
             ToString(g.a) + "_" + ToString(g.b) + "_to_" + ToString(g.c);
    });

TEST(Fp8Gemm, TwoE5M2OperandsAreRefusedAsCublasLtRefusesThem) {
  CpuBackend be;
  Tensor a = Upload(be, {1, 2, 3, 4}, DType::kE5M2), one = Upload(be, {1}), c = Upload(be, {0, 0, 0, 0});
  be.Fp8Gemm({.m = 2, .n = 2, .k = 2, .a = a.ptr(), .b = a.ptr(), .c = c.ptr(), .a_scale_inv = one.ptr(),
              .b_scale_inv = one.ptr(), .lda = 2, .ldb = 2, .ldc = 2});
  const Status s = be.Synchronize();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("fp8_e5m2"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace parallax::executor
