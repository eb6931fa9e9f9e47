// Conversion, fill, axpy, bias, GELU, SwiGLU and rotary kernels: elementwise with grid-stride
// loops. The activation formulas are the CPU backend's (executor/cpu/vector_kernels.cpp): GELU
// as x sigmoid(2u), exp arguments capped at 88 so 1 + exp() stays finite, zero where the cap hit.
#include <cmath>

#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoef = 0.044715f;
constexpr float kExpArgMax = 88.0f;

__device__ __forceinline__ double LoadD(const KPtr& p, int64_t i) {
  switch (p.t) {
    case DType::kF64: return static_cast<const double*>(p.p)[i];
    case DType::kI32: return static_cast<double>(static_cast<const int32_t*>(p.p)[i]);
    default: return static_cast<double>(Load(p, i));
  }
}

__global__ void ConvertKernel(KPtr dst, KPtr src, int64_t n) {
  PX_GRID_STRIDE(i, n) {
    const double v = LoadD(src, i);
    switch (dst.t) {
      case DType::kF64: static_cast<double*>(dst.p)[i] = v; break;
      case DType::kI32: static_cast<int32_t*>(dst.p)[i] = static_cast<int32_t>(v); break;
      default: Store(dst, i, static_cast<float>(v)); break;
    }
  }
}

__global__ void FillKernel(KPtr x, int64_t n, float value) {
  PX_GRID_STRIDE(i, n) Store(x, i, value);
}

__global__ void AxpyKernel(KPtr y, KPtr x, int64_t n, float alpha) {
  PX_GRID_STRIDE(i, n) Store(y, i, fmaf(alpha, Load(x, i), Load(y, i)));
}

__global__ void AddBiasKernel(KPtr y, KPtr bias, int64_t rows, int64_t cols) {
  PX_GRID_STRIDE(i, rows * cols) Store(y, i, Load(y, i) + Load(bias, i % cols));
}

// Column sums of rows [y * rows_per_chunk, ...) for blockIdx.y = y; blockDim (32, 8): 32 columns
// per block, the 8 thread rows take every 8th row of the chunk in order, then their sums are added
// in a fixed order. Without partials the sums are added to out; with them they land in
// partials[y * cols + c] for AddColumnPartialsKernel, which adds the chunks in order
// (deterministic, no atomics).
__global__ void ColumnSumsKernel(KPtr x, KPtr out, float* partials, int64_t rows, int64_t cols,
                                 int64_t rows_per_chunk) {
  __shared__ float part[8][33];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float s = 0;
  if (c < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) s += Load(x, r * cols + c);
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0;
    for (int j = 0; j < 8; ++j) total += part[j][threadIdx.x];
    if (partials != nullptr) {
      partials[static_cast<int64_t>(blockIdx.y) * cols + c] = total;
    } else {
      Store(out, c, Load(out, c) + total);
    }
  }
}

__global__ void AddColumnPartialsKernel(const float* partials, int64_t chunks, int64_t cols, KPtr out) {
  PX_GRID_STRIDE(c, cols) {
    float total = 0;
    for (int64_t y = 0; y < chunks; ++y) total += partials[y * cols + c];
    Store(out, c, Load(out, c) + total);
  }
}

__device__ __forceinline__ float ExpNegCapped(float z) { return expf(fminf(-z, kExpArgMax)); }

__device__ __forceinline__ float GeluTwoU(float x) {
  return x * (2.0f * kSqrt2OverPi) * fmaf(x * x, kGeluCoef, 1.0f);
}

__global__ void GeluKernel(KPtr x, KPtr y, int64_t n) {
  PX_GRID_STRIDE(i, n) {
    const float v = Load(x, i), two_u = GeluTwoU(v);
    Store(y, i, two_u < -kExpArgMax ? 0.0f : v / (1.0f + ExpNegCapped(two_u)));
  }
}

__global__ void GeluBackwardKernel(KPtr x, KPtr dy, KPtr dx, int64_t n) {
  PX_GRID_STRIDE(i, n) {
    const float v = Load(x, i), two_u = GeluTwoU(v);
    const float e = ExpNegCapped(two_u);
    const float s = 1.0f / (1.0f + e);  // sigmoid(2u) = (1 + tanh u) / 2
    const float one_minus_s = e * s;
    const float d2u = (2.0f * kSqrt2OverPi) * fmaf(3.0f * kGeluCoef, v * v, 1.0f);
    const float g = two_u < -kExpArgMax ? 0.0f : fmaf(v * s * one_minus_s, d2u, s);
    Store(dx, i, g * Load(dy, i));
  }
}

__global__ void SwigluKernel(KPtr gate, KPtr up, KPtr y, int64_t n) {
  PX_GRID_STRIDE(i, n) {
    const float g = Load(gate, i);
    const float silu = g < -kExpArgMax ? 0.0f : g / (1.0f + ExpNegCapped(g));
    Store(y, i, silu * Load(up, i));
  }
}

__global__ void SwigluBackwardKernel(KPtr gate, KPtr up, KPtr dy, KPtr dgate, KPtr dup, int64_t n) {
  PX_GRID_STRIDE(i, n) {
    const float g = Load(gate, i), e = ExpNegCapped(g), s = 1.0f / (1.0f + e);
    const float d = Load(dy, i), u = Load(up, i);
    const bool capped = g < -kExpArgMax;
    const float dsilu = capped ? 0.0f : s * fmaf(g, e * s, 1.0f);  // d silu/dg = s (1 + g (1 - s))
    Store(dgate, i, d * u * dsilu);
    Store(dup, i, d * (capped ? 0.0f : g * s));
  }
}

// One thread per (row, head, pair j < half): (x1, x2) = (x1 c - x2 s, x2 c + x1 s).
__global__ void RotaryKernel(KPtr x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim,
                             int64_t first_position, float sign) {
  const int64_t half = head_dim / 2;
  PX_GRID_STRIDE(i, seq * batch * heads * half) {
    const int64_t j = i % half, rh = i / half;  // rh = row * heads + head
    const int64_t pos = first_position + rh / heads / batch;
    const float inv_freq = static_cast<float>(pow(10000.0, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim)));
    const float theta = static_cast<float>(pos) * inv_freq;
    const float c = cosf(theta), s = sign * sinf(theta);
    const int64_t base = rh * head_dim;
    const float x1 = Load(x, base + j), x2 = Load(x, base + half + j);
    Store(x, base + j, fmaf(-x2, s, x1 * c));
    Store(x, base + half + j, fmaf(x1, s, x2 * c));
  }
}

}  // namespace

cudaError_t LaunchConvert(KPtr dst, KPtr src, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  ConvertKernel<<<GridFor(n), kThreads, 0, s>>>(dst, src, n);
  return cudaGetLastError();
}

cudaError_t LaunchFill(KPtr x, int64_t n, float value, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  FillKernel<<<GridFor(n), kThreads, 0, s>>>(x, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchAxpy(KPtr y, KPtr x, int64_t n, float alpha, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  AxpyKernel<<<GridFor(n), kThreads, 0, s>>>(y, x, n, alpha);
  return cudaGetLastError();
}

cudaError_t LaunchAddBias(KPtr y, KPtr bias, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols <= 0) return cudaSuccess;
  AddBiasKernel<<<GridFor(rows * cols), kThreads, 0, s>>>(y, bias, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchColumnSums(KPtr x, KPtr out, int64_t rows, int64_t cols, float* partials, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int64_t chunks = ColumnChunks(rows, cols);
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  ColumnSumsKernel<<<dim3(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks)), dim3(32, 8), 0,
                     s>>>(x, out, chunks > 1 ? partials : nullptr, rows, cols, per_chunk);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || chunks == 1) return e;
  return LaunchAddColumnPartials(partials, chunks, cols, out, s);
}

cudaError_t LaunchAddColumnPartials(const float* partials, int64_t chunks, int64_t cols, KPtr out, cudaStream_t s) {
  AddColumnPartialsKernel<<<GridFor(cols), kThreads, 0, s>>>(partials, chunks, cols, out);
  return cudaGetLastError();
}

cudaError_t LaunchGelu(KPtr x, KPtr y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  GeluKernel<<<GridFor(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchGeluBackward(KPtr x, KPtr dy, KPtr dx, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  GeluBackwardKernel<<<GridFor(n), kThreads, 0, s>>>(x, dy, dx, n);
  return cudaGetLastError();
}

cudaError_t LaunchSwiglu(KPtr gate, KPtr up, KPtr y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  SwigluKernel<<<GridFor(n), kThreads, 0, s>>>(gate, up, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchSwigluBackward(KPtr gate, KPtr up, KPtr dy, KPtr dgate, KPtr dup, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  SwigluBackwardKernel<<<GridFor(n), kThreads, 0, s>>>(gate, up, dy, dgate, dup, n);
  return cudaGetLastError();
}

cudaError_t LaunchRotary(KPtr x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, int64_t first_position,
                         bool inverse, cudaStream_t s) {
  const int64_t n = seq * batch * heads * (head_dim / 2);
  if (n <= 0) return cudaSuccess;
  RotaryKernel<<<GridFor(n), kThreads, 0, s>>>(x, seq, batch, heads, head_dim, first_position,
                                                inverse ? -1.0f : 1.0f);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu
