// The softmax halves of causal attention; the products around them (Q K^T, P V and the four of the
// backward) are strided-batched cuBLASLt GEMMs on the tensor cores (cuda_kernels.cpp,
// CudaBackend::AttentionForward/Backward). One block per score row: the row is read from the fp32
// scores the GEMM wrote, reduced (max, sum) in fp32 and written back in the probabilities' dtype,
// zeros above the diagonal so the next GEMM can read whole rows.
#include <cmath>

#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

constexpr int kRowThreads = 256;

// Row r of item t is score row i = r % S of item t = r / S.
// P[i, j] = exp(s_ij - max_j' s_ij') / sum for j <= i, 0 beyond.
__global__ void __launch_bounds__(kRowThreads)
    CausalSoftmaxKernel(const float* scores, KPtr p, int64_t p_stride, int64_t seq) {
  const int64_t r = blockIdx.x, t = r / seq, i = r % seq, n = i + 1;
  const float* row = scores + r * seq;
  const int64_t base = t * p_stride + i * seq;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) m = fmaxf(m, row[c]);
  m = BlockMax(m);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) sum += expf(row[c] - m);
  const float inv = 1.0f / BlockSum(sum);
  for (int64_t c = threadIdx.x; c < seq; c += blockDim.x) Store(p, base + c, c < n ? expf(row[c] - m) * inv : 0.0f);
}

// dS[i, j] = P_ij (dP_ij - sum_j' P_ij' dP_ij') * scale for j <= i, 0 beyond. ds may be p (each
// element is read and then written by the same thread, after the row's sum is known).
__global__ void __launch_bounds__(kRowThreads)
    CausalSoftmaxBackwardKernel(KPtr p, int64_t p_stride, const float* dp, KPtr ds, int64_t ds_stride, int64_t seq,
                                float scale) {
  const int64_t r = blockIdx.x, t = r / seq, i = r % seq, n = i + 1;
  const float* drow = dp + r * seq;
  const int64_t pb = t * p_stride + i * seq, db = t * ds_stride + i * seq;
  float acc = 0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) acc = fmaf(Load(p, pb + c), drow[c], acc);
  const float delta = BlockSum(acc);
  for (int64_t c = threadIdx.x; c < seq; c += blockDim.x) {
    Store(ds, db + c, c < n ? Load(p, pb + c) * (drow[c] - delta) * scale : 0.0f);
  }
}

}  // namespace

cudaError_t LaunchCausalSoftmax(const float* scores, KPtr p, int64_t p_stride, int64_t items, int64_t seq,
                                cudaStream_t s) {
  if (items <= 0 || seq <= 0) return cudaSuccess;
  CausalSoftmaxKernel<<<static_cast<unsigned>(items * seq), kRowThreads, 0, s>>>(scores, p, p_stride, seq);
  return cudaGetLastError();
}

cudaError_t LaunchCausalSoftmaxBackward(KPtr p, int64_t p_stride, const float* dp, KPtr ds, int64_t ds_stride,
                                        int64_t items, int64_t seq, float scale, cudaStream_t s) {
  if (items <= 0 || seq <= 0) return cudaSuccess;
  CausalSoftmaxBackwardKernel<<<static_cast<unsigned>(items * seq), kRowThreads, 0, s>>>(p, p_stride, dp, ds,
                                                                                        ds_stride, seq, scale);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu
