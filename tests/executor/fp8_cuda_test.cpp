// The CUDA backend's FP8 kernels against the CPU backend's exact emulation (label gpu: needs a GPU;
// the GEMM needs compute capability 8.9+ and checks the error on older GPUs instead): the casts
// write the same codes and amax, the delayed-scaling update the same scales, and the cuBLASLt FP8
// GEMM the same result up to the order of its fp32 accumulation, for every transpose and both
// HYBRID operand pairs.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <vector>

#include "executor/backend_registry.h"
#include "executor/cpu/cpu_backend.h"

namespace parallax::executor {
namespace {

std::unique_ptr<Backend> Cuda() {
  auto b = CreateBackend("cuda");
  return b ? std::move(b).value() : nullptr;
}

int ComputeCapability() {
  int major = 0, minor = 0;
  (void)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  (void)cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return 10 * major + minor;
}

Tensor Put(Backend& be, const std::vector<float>& v, DType t = DType::kF32) {
  Tensor x = be.Allocate(static_cast<int64_t>(v.size()), t, MemoryKind::kWorkspace).value();
  be.CopyToDevice(x.ptr(), v.data(), DType::kF32, static_cast<int64_t>(v.size()));
  return x;
}

std::vector<uint8_t> Bytes(Backend& be, const Tensor& t) {
  std::vector<uint8_t> v(static_cast<size_t>(t.bytes()));
  be.CopyBytesToHost(v.data(), t.ptr(), t.numel());
  return v;
}

std::vector<float> Floats(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.CopyToHost(v.data(), DType::kF32, t.ptr(), t.numel());
  return v;
}

std::vector<float> Random(int64_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Fp8Cuda, CastWritesTheCodesAndAmaxOfTheCpuEmulation) {
  auto gpu = Cuda();
  if (!gpu) GTEST_SKIP() << "no GPU";
  CpuBackend cpu;
  std::vector<float> v = Random(100003, 3, 40.0f);
  v[17] = 1e9f;  // saturates
  v[18] = -std::ldexp(1.0f, -12);  // subnormal after scaling
  for (DType t : {DType::kE4M3, DType::kE5M2}) {
    std::vector<uint8_t> codes[2];
    float amax[2];
    Backend* both[2] = {&cpu, gpu.get()};
    for (int i = 0; i < 2; ++i) {
      Tensor x = Put(*both[i], v), scale = Put(*both[i], {3.7f}), am = Put(*both[i], {0.0f});
      Tensor y = both[i]->Allocate(static_cast<int64_t>(v.size()), t, MemoryKind::kWorkspace).value();
      both[i]->Fp8Cast({.x = x.ptr(), .scale = scale.ptr(), .y = y.ptr(), .amax = am.ptr(),
                        .n = static_cast<int64_t>(v.size())});
      ASSERT_TRUE(both[i]->Synchronize());
      codes[i] = Bytes(*both[i], y);
      amax[i] = Floats(*both[i], am)[0];
    }
    EXPECT_EQ(codes[0], codes[1]) << ToString(t);
    EXPECT_EQ(amax[0], amax[1]) << ToString(t);
  }
}

TEST(Fp8Cuda, ScaleUpdateMatchesTheCpuBackend) {
  auto gpu = Cuda();
  if (!gpu) GTEST_SKIP() << "no GPU";
  CpuBackend cpu;
  const DelayedScaling recipe{.margin = 1, .amax_history_len = 4, .amax_algo = AmaxAlgo::kMax};
  std::vector<float> history = Random(4 * 5, 5, 2.0f);
  for (auto& h : history) h = std::fabs(h);
  history[3] = 0.0f;  // tensor 3 saw nothing this step
  Backend* both[2] = {&cpu, gpu.get()};
  std::vector<float> scales[2], hist[2];
  for (int i = 0; i < 2; ++i) {
    Tensor h = Put(*both[i], history), s = Put(*both[i], {1, 2, 3, 4, 5}), si = Put(*both[i], {1, 1, 1, 1, 1});
    both[i]->Fp8ScaleUpdate({.amax_history = h.ptr(), .scale = s.ptr(), .scale_inv = si.ptr(), .count = 5,
                             .format = Fp8Format::kE5M2, .recipe = recipe});
    ASSERT_TRUE(both[i]->Synchronize());
    scales[i] = Floats(*both[i], s);
    hist[i] = Floats(*both[i], h);
  }
  EXPECT_EQ(scales[0], scales[1]);
  EXPECT_EQ(hist[0], hist[1]);
}

struct Case {
  Trans ta, tb;
  DType a, b, c;
};

class Fp8CudaGemm : public ::testing::TestWithParam<Case> {};

TEST_P(Fp8CudaGemm, MatchesTheCpuEmulationUpToTheAccumulationOrder) {
  auto gpu = Cuda();
  if (!gpu) GTEST_SKIP() << "no GPU";
  const Case gc = GetParam();
  const int64_t m = 256, n = 192, k = 512;
  CpuBackend cpu;
  const std::vector<float> a32 = Random(m * k, 1, 1.0f), b32 = Random(k * n, 2, 0.05f), c0 = Random(m * n, 4, 1.0f);
  Backend* both[2] = {&cpu, gpu.get()};
  std::vector<float> out[2];
  for (int i = 0; i < 2; ++i) {
    Backend& be = *both[i];
    Tensor ai = Put(be, a32), bi = Put(be, b32), c = Put(be, c0, gc.c);
    Tensor sa = Put(be, {100.0f}), sb = Put(be, {gc.b == DType::kE5M2 ? 20000.0f : 3000.0f});
    Tensor ia = Put(be, {0.01f}), ib = Put(be, {gc.b == DType::kE5M2 ? 1 / 20000.0f : 1 / 3000.0f});
    Tensor a = be.Allocate(m * k, gc.a, MemoryKind::kWorkspace).value();
    Tensor b = be.Allocate(k * n, gc.b, MemoryKind::kWorkspace).value();
    be.Fp8Cast({.x = ai.ptr(), .scale = sa.ptr(), .y = a.ptr(), .n = m * k});
    be.Fp8Cast({.x = bi.ptr(), .scale = sb.ptr(), .y = b.ptr(), .n = k * n});
    be.Fp8Gemm({.ta = gc.ta, .tb = gc.tb, .m = m, .n = n, .k = k, .alpha = 1.5f, .beta = 0.5f, .a = a.ptr(),
                .b = b.ptr(), .c = c.ptr(), .a_scale_inv = ia.ptr(), .b_scale_inv = ib.ptr(),
                .lda = gc.ta == Trans::kYes ? m : k, .ldb = gc.tb == Trans::kYes ? k : n, .ldc = n});
    const Status st = be.Synchronize();
    if (i == 1 && ComputeCapability() < 89) {
      ASSERT_FALSE(st);
      EXPECT_NE(st.error().message.find("compute capability 8.9"), std::string::npos) << st.error().message;
      return;
    }
    ASSERT_TRUE(st) << st.error().message;
    out[i] = Floats(be, c);
  }
  double err = 0, norm = 0;
  for (size_t i = 0; i < out[0].size(); ++i) {
    err += (out[1][i] - static_cast<double>(out[0][i])) * (out[1][i] - out[0][i]);
    norm += static_cast<double>(out[0][i]) * out[0][i];
  }
  // fp32 output: two fp32 accumulation orders of the same exact products (k = 512). 16-bit output:
  // the two may round to neighbouring values.
  const double bar = gc.c == DType::kF32 ? 1e-5 : (gc.c == DType::kBf16 ? 1e-2 : 2e-3);
  EXPECT_LE(std::sqrt(err / norm), bar);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Fp8CudaGemm,
                         ::testing::Values(Case{Trans::kNo, Trans::kYes, DType::kE4M3, DType::kE4M3, DType::kBf16},
                                           Case{Trans::kNo, Trans::kYes, DType::kE4M3, DType::kE4M3, DType::kF32},
                                           Case{Trans::kNo, Trans::kNo, DType::kE5M2, DType::kE4M3, DType::kF32},
                                           Case{Trans::kYes, Trans::kNo, DType::kE5M2, DType::kE4M3, DType::kF32},
                                           Case{Trans::kYes, Trans::kYes, DType::kE4M3, DType::kE5M2, DType::kF16}),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           const Case& g = param.param;
                           return std::string(g.ta == Trans::kYes ? "T" : "N") + (g.tb == Trans::kYes ? "T" : "N") +
                                  "_" + ToString(g.a) + "_" + ToString(g.b) + "_to_" + ToString(g.c);
                         });

}  // namespace
}  // namespace parallax::executor
