#pragma once
// FP8 arithmetic of the executor: the two OCP FP8 formats, their round-to-nearest-even saturating
// casts, per-tensor scaling and Transformer Engine's delayed-scaling recipe. One definition read by
// the CPU backend's emulation (executor/cpu/fp8_kernels.cpp) and the CUDA backend's host code and
// kernels (executor/cuda/fp8_kernels.cu); the scalar rules are host-and-device functions.
//
// Formats: OCP 8-bit Floating Point Specification (OFP8) rev. 1.0 (2023), section 5:
//   E4M3: bias 7, no infinities, NaN = S.1111.111, largest finite 448 = 1.75 * 2^8;
//   E5M2: bias 15, IEEE-like, inf = S.11111.00, NaN = S.11111.{01,10,11}, largest finite 57344.
// Casts: round to nearest, ties to even, with saturation (OFP8 section 5.3's "saturating" mode,
// CUDA's __NV_SATFINITE, which Transformer Engine uses): a finite value or an infinity beyond the
// largest finite value becomes that value with its sign; NaN stays NaN (code 0x7f with the sign).
//
// Scaling (Transformer Engine, "FP8 Delayed Scaling" and transformer_engine/pytorch/fp8.py
// _default_sf_compute): q = cast(x * scale), x ~ dequantized = code * scale_inv, scale_inv =
// 1 / scale. From an amax, scale = fp8_max / amax / 2^margin; an amax that is zero or not finite
// keeps the previous scale. Delayed: the scale used in step t comes from the amax history of the
// steps before t (the history's row 0 collects this step's amax; at the end of the step the scale is
// computed from the history by `max` over the window or the `most_recent` row, then the history is
// rotated by -1 and row 0 zeroed: nvte_delayed_scaling_recipe_amax_and_scale_update). Format HYBRID:
// E4M3 for the forward GEMM inputs (activations, weights), E5M2 for the gradients.
// C++17 (nvcc compiles the .cu files as C++17).

#include <cstdint>

#include "executor/dtype.h"

#if defined(__CUDACC__)
#define PX_HOST_DEVICE __host__ __device__
#else
#define PX_HOST_DEVICE
#endif

namespace parallax::executor {

enum class Fp8Format : uint8_t { kE4M3, kE5M2 };

inline constexpr DType DTypeOf(Fp8Format f) { return f == Fp8Format::kE4M3 ? DType::kE4M3 : DType::kE5M2; }
inline constexpr Fp8Format Fp8FormatOf(DType t) {
  return t == DType::kE5M2 ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
}
const char* ToString(Fp8Format f);

//! Largest finite value (OFP8 table 1).
PX_HOST_DEVICE inline constexpr float Fp8Max(Fp8Format f) { return f == Fp8Format::kE4M3 ? 448.0f : 57344.0f; }
//! Smallest positive value (a subnormal): 2^-9 (E4M3), 2^-16 (E5M2).
PX_HOST_DEVICE inline constexpr float Fp8MinSubnormal(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? 1.0f / 512.0f : 1.0f / 65536.0f;
}
inline constexpr uint8_t kFp8NaN = 0x7f;  //!< the NaN the casts write (with the input's sign)

//! Round to nearest even, saturating (see the top of the file).
uint8_t FloatToFp8(float x, Fp8Format f);
//! Exact (every FP8 value is a float). E5M2's infinity codes decode to infinity.
float Fp8ToFloat(uint8_t code, Fp8Format f);

//! The scale that maps `amax` to fp8_max / 2^margin, or `previous` when amax is zero, negative or
//! not finite; an infinite result (amax below fp8_max / FLT_MAX) becomes FLT_MAX.
PX_HOST_DEVICE inline float Fp8ScaleFromAmax(float amax, float previous, Fp8Format f, int margin) {
  if (!(amax > 0.0f) || amax - amax != 0.0f) return previous;  // zero, negative, NaN, inf
  float margin_factor = 1.0f;
  for (int i = 0; i < margin; ++i) margin_factor *= 2.0f;
  for (int i = 0; i > margin; --i) margin_factor *= 0.5f;
  const float s = Fp8Max(f) / amax / margin_factor;
  return s - s != 0.0f ? 3.402823466e38f : s;
}

//! max(a, |x|) over the bits of non-negative floats: NaN (exponent all ones, mantissa non-zero)
//! orders above infinity above every finite value, so a NaN or inf anywhere shows in the amax and
//! the scale update keeps the previous scale.
PX_HOST_DEVICE inline uint32_t AmaxBits(uint32_t a, float x) {
  uint32_t b = 0;
#if defined(__CUDA_ARCH__)
  b = static_cast<uint32_t>(__float_as_uint(x));
#else
  __builtin_memcpy(&b, &x, sizeof b);
#endif
  b &= 0x7fffffffu;
  return b > a ? b : a;
}
PX_HOST_DEVICE inline float FloatOfBits(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f = 0;
  __builtin_memcpy(&f, &b, sizeof f);
  return f;
#endif
}

enum class AmaxAlgo : uint8_t { kMax, kMostRecent };

//! Transformer Engine's DelayedScaling recipe (transformer_engine.common.recipe.DelayedScaling);
//! the format is always HYBRID. Defaults are TE's (margin 0, history 1024, "max").
struct DelayedScaling {
  int margin = 0;
  int64_t amax_history_len = 1024;
  AmaxAlgo amax_algo = AmaxAlgo::kMax;
};

//! The end-of-step update of tensor `t` of `count` scaled tensors of one format: history is
//! [recipe.amax_history_len, count] row-major fp32 whose row 0 holds this step's amax; scale and
//! scale_inv are `count` fp32. The new scale comes from the window (before rotating); then the
//! column is rotated by -1 (row r takes row r + 1, the last row takes row 0) and row 0 zeroed.
PX_HOST_DEVICE inline void DelayedScalingUpdateOne(float* history, float* scale, float* scale_inv, int64_t count,
                                                   int64_t t, Fp8Format f, const DelayedScaling& recipe) {
  const int64_t len = recipe.amax_history_len;
  float amax = history[t];
  if (recipe.amax_algo == AmaxAlgo::kMax) {
    uint32_t bits = 0;
    for (int64_t r = 0; r < len; ++r) bits = AmaxBits(bits, history[r * count + t]);
    amax = FloatOfBits(bits);
  }
  scale[t] = Fp8ScaleFromAmax(amax, scale[t], f, recipe.margin);
  scale_inv[t] = 1.0f / scale[t];
  const float first = history[t];
  for (int64_t r = 0; r + 1 < len; ++r) history[r * count + t] = history[(r + 1) * count + t];
  history[(len - 1) * count + t] = first;
  history[t] = 0.0f;
}

//! DelayedScalingUpdateOne for every tensor.
void DelayedScalingUpdate(float* history, float* scale, float* scale_inv, int64_t count, Fp8Format f,
                          const DelayedScaling& recipe);

}  // namespace parallax::executor
