// The CPU backend's FP8 kernels: an exact emulation of scaled FP8 casts and GEMMs (executor/fp8.h).
// FP8 codes are decoded to fp32 (exact) and multiplied by BLAS sgemm: a product of two FP8 values
// has at most 8 significant bits, so it is exact in fp32 and the GEMM rounds only where it
// accumulates, in fp32, as an FP8 tensor-core GEMM does.
#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "executor/cpu/cpu_backend.h"

namespace parallax::executor {

void ConvertElements(void* dst, DType dt, const void* src, DType st, int64_t n);

namespace {

const std::array<float, 256>& DecodeTable(Fp8Format f) {
  static const auto tables = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int c = 0; c < 256; ++c) {
      t[0][static_cast<size_t>(c)] = Fp8ToFloat(static_cast<uint8_t>(c), Fp8Format::kE4M3);
      t[1][static_cast<size_t>(c)] = Fp8ToFloat(static_cast<uint8_t>(c), Fp8Format::kE5M2);
    }
    return t;
  }();
  return tables[f == Fp8Format::kE4M3 ? 0 : 1];
}

std::vector<float> Decode(DevPtr p, int64_t n) {
  const auto& table = DecodeTable(Fp8FormatOf(p.dtype));
  const auto* codes = static_cast<const uint8_t*>(p.ptr);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = table[codes[i]];
  return out;
}

float Scalar(DevPtr p) { return *static_cast<const float*>(p.ptr); }

// Elements a row-major operand of `rows` x `cols` with leading dimension `ld` spans.
int64_t Span(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 ? 0 : (rows - 1) * ld + cols; }

}  // namespace

void CpuBackend::Fp8Cast(const Fp8CastArgs& a) {
  if (!IsFp8(a.y.dtype) || IsFp8(a.x.dtype) || !a.scale) {
    return Fail(Error{"cpu backend: Fp8Cast needs a float x, an FP8 y and a scale", ErrorKind::kInternal});
  }
  std::vector<float> widened;
  const float* x = static_cast<const float*>(a.x.ptr);
  if (a.x.dtype != DType::kF32) {
    widened.resize(static_cast<size_t>(a.n));
    ConvertElements(widened.data(), DType::kF32, a.x.ptr, a.x.dtype, a.n);
    x = widened.data();
  }
  const float scale = Scalar(a.scale);
  const Fp8Format f = Fp8FormatOf(a.y.dtype);
  auto* y = static_cast<uint8_t*>(a.y.ptr);
  uint32_t amax = 0;
  for (int64_t i = 0; i < a.n; ++i) {
    y[i] = FloatToFp8(x[i] * scale, f);
    amax = AmaxBits(amax, x[i]);
  }
  if (a.amax) {
    auto* out = static_cast<float*>(a.amax.ptr);
    *out = std::bit_cast<float>(AmaxBits(amax, *out));
  }
}

void CpuBackend::Fp8Gemm(const Fp8GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  if (!IsFp8(g.a.dtype) || !IsFp8(g.b.dtype) || (g.a.dtype == DType::kE5M2 && g.b.dtype == DType::kE5M2) ||
      !(g.c.dtype == DType::kF32 || IsHalf(g.c.dtype)) || !g.a_scale_inv || !g.b_scale_inv) {
    return Fail(Error{std::string("cpu backend: Fp8Gemm cannot take A ") + ToString(g.a.dtype) + ", B " +
                          ToString(g.b.dtype) + ", C " + ToString(g.c.dtype) + " (or a scale is missing)",
                      ErrorKind::kInternal});
  }
  (void)streams_.Progress();  // let queued communication move while the host computes
  const std::vector<float> a =
      Decode(g.a, g.ta == Trans::kYes ? Span(g.k, g.m, g.lda) : Span(g.m, g.k, g.lda));
  const std::vector<float> b =
      Decode(g.b, g.tb == Trans::kYes ? Span(g.n, g.k, g.ldb) : Span(g.k, g.n, g.ldb));
  const float alpha = g.alpha * Scalar(g.a_scale_inv) * Scalar(g.b_scale_inv);
  if (g.c.dtype == DType::kF32) {
    Gemm(g.ta, g.tb, g.m, g.n, g.k, alpha, a.data(), g.lda, b.data(), g.ldb, g.beta, static_cast<float*>(g.c.ptr),
         g.ldc);
    return;
  }
  const int64_t c_span = Span(g.m, g.n, g.ldc);
  std::vector<float> c(static_cast<size_t>(c_span));
  if (g.beta != 0.0f) ConvertElements(c.data(), DType::kF32, g.c.ptr, g.c.dtype, c_span);
  Gemm(g.ta, g.tb, g.m, g.n, g.k, alpha, a.data(), g.lda, b.data(), g.ldb, g.beta, c.data(), g.ldc);
  // Only the m x n block: the gaps between rows (ldc > n) are not C's and stay as they were.
  for (int64_t r = 0; r < g.m; ++r) {
    ConvertElements((g.c + r * g.ldc).ptr, g.c.dtype, c.data() + r * g.ldc, DType::kF32, g.n);
  }
}

void CpuBackend::Fp8ScaleUpdate(const Fp8ScaleUpdateArgs& a) {
  DelayedScalingUpdate(static_cast<float*>(a.amax_history.ptr), static_cast<float*>(a.scale.ptr),
                       static_cast<float*>(a.scale_inv.ptr), a.count, a.format, a.recipe);
}

}  // namespace parallax::executor
