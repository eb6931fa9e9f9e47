#pragma once
// Device helpers shared by the kernels: loads and stores of any float dtype through fp32
// (round to nearest even on store, as executor/dtype.h's host casts), grid-stride loops and
// block reductions.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "executor/cuda/kernels.h"

namespace parallax::executor::gpu {

// FP8 codes through the hardware casts: round to nearest even, saturating to the largest finite
// value, NaN kept (CUDA's __NV_SATFINITE; the CPU backend's FloatToFp8 in executor/fp8.h).
__device__ __forceinline__ float Fp8Load(__nv_fp8_storage_t code, DType t) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, t == DType::kE4M3 ? __NV_E4M3 : __NV_E5M2)));
}
__device__ __forceinline__ __nv_fp8_storage_t Fp8Store(float v, DType t) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, t == DType::kE4M3 ? __NV_E4M3 : __NV_E5M2);
}

__device__ __forceinline__ float Load(const KPtr& p, int64_t i) {
  switch (p.t) {
    case DType::kF32: return static_cast<const float*>(p.p)[i];
    case DType::kBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p.p)[i]);
    case DType::kF16: return __half2float(static_cast<const __half*>(p.p)[i]);
    case DType::kI32: return static_cast<float>(static_cast<const int32_t*>(p.p)[i]);
    case DType::kF64: return static_cast<float>(static_cast<const double*>(p.p)[i]);
    case DType::kE4M3:
    case DType::kE5M2: return Fp8Load(static_cast<const __nv_fp8_storage_t*>(p.p)[i], p.t);
  }
  return 0.0f;
}

__device__ __forceinline__ void Store(const KPtr& p, int64_t i, float v) {
  switch (p.t) {
    case DType::kF32: static_cast<float*>(p.p)[i] = v; break;
    case DType::kBf16: static_cast<__nv_bfloat16*>(p.p)[i] = __float2bfloat16_rn(v); break;
    case DType::kF16: static_cast<__half*>(p.p)[i] = __float2half_rn(v); break;
    case DType::kI32: static_cast<int32_t*>(p.p)[i] = static_cast<int32_t>(v); break;
    case DType::kF64: static_cast<double*>(p.p)[i] = static_cast<double>(v); break;
    case DType::kE4M3:
    case DType::kE5M2: static_cast<__nv_fp8_storage_t*>(p.p)[i] = Fp8Store(v, p.t); break;
  }
}

inline constexpr int kThreads = 256;

inline unsigned GridFor(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 16 ? 65535 * 16 : blocks));
}

#define PX_GRID_STRIDE(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);      \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

template <class T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

//! Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
template <class T>
__device__ T BlockSum(T v) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = WarpSum(v);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  T total = lane < warps ? partial[lane] : T(0);
  total = WarpSum(total);
  return total;
}

__device__ __forceinline__ float BlockMax(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float m = lane < warps ? partial[lane] : -INFINITY;
  return WarpMax(m);
}

}  // namespace parallax::executor::gpu
