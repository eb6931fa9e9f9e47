// A plain shared-memory tiled GEMM (16 x 16 tiles, fp32 accumulation) for the shapes cuBLASLt
// declines (its heuristics return no algorithm, e.g. 16-bit operands with odd leading
// dimensions). Correct for every transpose, leading dimension and batch stride; not fast.
#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

constexpr int kT = 16;

struct GemmParams {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  KPtr a, b, c;
  int64_t lda, ldb, ldc, sa, sb, sc;
};

__global__ void GemmFallbackKernel(const GemmParams g) {
  __shared__ float As[kT][kT + 1], Bs[kT][kT + 1];
  const int64_t batch = blockIdx.z;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kT + threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kT + threadIdx.x;
  const int64_t a0 = batch * g.sa, b0 = batch * g.sb, c0 = batch * g.sc;
  float acc = 0.0f;
  for (int64_t p0 = 0; p0 < g.k; p0 += kT) {
    // As[y][x] = op(A)[row, p0 + x]; Bs[y][x] = op(B)[p0 + y, col].
    const int64_t ar = static_cast<int64_t>(blockIdx.y) * kT + threadIdx.y, ap = p0 + threadIdx.x;
    As[threadIdx.y][threadIdx.x] =
        (ar < g.m && ap < g.k) ? Load(g.a, a0 + (g.ta ? ap * g.lda + ar : ar * g.lda + ap)) : 0.0f;
    const int64_t bp = p0 + threadIdx.y, bc = static_cast<int64_t>(blockIdx.x) * kT + threadIdx.x;
    Bs[threadIdx.y][threadIdx.x] =
        (bp < g.k && bc < g.n) ? Load(g.b, b0 + (g.tb ? bc * g.ldb + bp : bp * g.ldb + bc)) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kT; ++p) acc = fmaf(As[threadIdx.y][p], Bs[p][threadIdx.x], acc);
    __syncthreads();
  }
  if (row < g.m && col < g.n) {
    const int64_t o = c0 + row * g.ldc + col;
    const float prior = g.beta != 0.0f ? g.beta * Load(g.c, o) : 0.0f;
    Store(g.c, o, fmaf(g.alpha, acc, prior));
  }
}

}  // namespace

cudaError_t LaunchGemmFallback(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, KPtr a, int64_t lda,
                               int64_t stride_a, KPtr b, int64_t ldb, int64_t stride_b, float beta, KPtr c,
                               int64_t ldc, int64_t stride_c, int64_t batch, cudaStream_t s) {
  if (m <= 0 || n <= 0 || batch <= 0) return cudaSuccess;
  const GemmParams g{ta, tb, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc, stride_a, stride_b, stride_c};
  const dim3 grid(static_cast<unsigned>((n + kT - 1) / kT), static_cast<unsigned>((m + kT - 1) / kT),
                  static_cast<unsigned>(batch));
  GemmFallbackKernel<<<grid, dim3(kT, kT), 0, s>>>(g);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu
