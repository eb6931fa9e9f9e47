// FP8 kernels of the CUDA backend around cuBLASLt's FP8 matmul: the scaled cast with its amax, the
// byte transpose that puts an operand in the K-major order cuBLASLt's FP8 kernels need, the
// epilogue of the fallback GEMM, and Transformer Engine's delayed-scaling update (one definition
// with the CPU backend: executor/fp8.h).
#include "executor/cuda/device_common.cuh"
#include "executor/fp8.h"

namespace parallax::executor::gpu {
namespace {

__global__ void Fp8CastKernel(KPtr x, const float* scale, KPtr y, unsigned int* amax_bits, int64_t n) {
  const float s = scale[0];
  uint32_t bits = 0;
  PX_GRID_STRIDE(i, n) {
    const float v = Load(x, i);
    Store(y, i, v * s);
    bits = AmaxBits(bits, v);
  }
  if (amax_bits == nullptr) return;
  for (int o = 16; o > 0; o >>= 1) {
    const uint32_t other = __shfl_xor_sync(0xffffffffu, bits, o);
    bits = other > bits ? other : bits;
  }
  // Non-negative floats order as their bits (NaN above inf): an integer max is the float max.
  if ((threadIdx.x & 31) == 0 && bits != 0) atomicMax(amax_bits, bits);
}

constexpr int kTile = 32;

__global__ void TransposeBytesKernel(const uint8_t* src, int64_t rows, int64_t cols, int64_t ld, uint8_t* dst) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile, c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
    const int64_t r = r0 + dy, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[dy][threadIdx.x] = src[r * ld + c];
  }
  __syncthreads();
  for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
    const int64_t c = c0 + dy, r = r0 + threadIdx.x;  // dst is cols x rows
    if (c < cols && r < rows) dst[c * rows + r] = tile[threadIdx.x][dy];
  }
}

__global__ void Fp8EpilogueKernel(const float* acc, int64_t m, int64_t n, float alpha, const float* a_scale_inv,
                                  const float* b_scale_inv, float beta, KPtr c, int64_t ldc) {
  const float f = alpha * a_scale_inv[0] * b_scale_inv[0];
  PX_GRID_STRIDE(i, m * n) {
    const int64_t r = i / n, col = i % n;
    const float prior = beta != 0.0f ? beta * Load(c, r * ldc + col) : 0.0f;
    Store(c, r * ldc + col, f * acc[i] + prior);
  }
}

__global__ void Fp8ScaleUpdateKernel(float* history, float* scale, float* scale_inv, int64_t count, Fp8Format f,
                                     DelayedScaling recipe) {
  PX_GRID_STRIDE(t, count) DelayedScalingUpdateOne(history, scale, scale_inv, count, t, f, recipe);
}

}  // namespace

cudaError_t LaunchFp8Cast(KPtr x, const float* scale, KPtr y, float* amax, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  Fp8CastKernel<<<GridFor(n), kThreads, 0, s>>>(x, scale, y, reinterpret_cast<unsigned int*>(amax), n);
  return cudaGetLastError();
}

cudaError_t LaunchTransposeBytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t ld, uint8_t* dst,
                                 cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  TransposeBytesKernel<<<grid, dim3(kTile, 8), 0, s>>>(src, rows, cols, ld, dst);
  return cudaGetLastError();
}

cudaError_t LaunchFp8Epilogue(const float* acc, int64_t m, int64_t n, float alpha, const float* a_scale_inv,
                              const float* b_scale_inv, float beta, KPtr c, int64_t ldc, cudaStream_t s) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  Fp8EpilogueKernel<<<GridFor(m * n), kThreads, 0, s>>>(acc, m, n, alpha, a_scale_inv, b_scale_inv, beta, c, ldc);
  return cudaGetLastError();
}

cudaError_t LaunchFp8ScaleUpdate(float* history, float* scale, float* scale_inv, int64_t count, Fp8Format f,
                                 const DelayedScaling& recipe, cudaStream_t s) {
  if (count <= 0) return cudaSuccess;
  Fp8ScaleUpdateKernel<<<GridFor(count), kThreads, 0, s>>>(history, scale, scale_inv, count, f, recipe);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu
