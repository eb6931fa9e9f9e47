// The softmax halves of the GEMM attention path; the products around them (Q K^T, P V and the five
// of the backward) are strided-batched cuBLASLt GEMMs on the tensor cores (cuda_kernels.cpp,
// CudaBackend::AttentionForward/Backward). One block per score row: the row is read from the fp32
// scores the GEMM wrote, reduced (max, sum) in fp32 and written back in the probabilities' dtype,
// zeros past the keys the row sees so the next GEMM can read whole rows. The forward keeps the row
// log-sum-exp (fp32), never the probabilities; the backward rebuilds them from it (FlashAttention-2's
// statistics, Dao 2023, algorithm 2), with delta = rowsum(dO * O) from its own kernel.
#include <cmath>

#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

constexpr int kRowThreads = 256;

// Keys score row i sees: [First(m, i), Visible(m, i)) (AttentionShape::FirstVisibleKey, VisibleKeys).
__device__ __forceinline__ int64_t Visible(const AttnRowMask& m, int64_t i) {
  if (!m.causal) return m.keys;
  const int64_t n = i + m.offset + 1;
  return n < 0 ? 0 : (n > m.keys ? m.keys : n);
}

__device__ __forceinline__ int64_t First(const AttnRowMask& m, int64_t i) {
  if (!m.causal || m.window <= 0) return 0;
  int64_t f = i + m.offset - m.window + 1;
  if (m.chunked) {
    const int64_t p = m.query_start + i;
    f = p / m.window * m.window - (m.query_start - m.offset);
  }
  return f < 0 ? 0 : (f > m.keys ? m.keys : f);
}

// Row r of the chunk is score row i = r % seq of item t = r / seq; its statistic at
// stats[i * row_stride + t * item_stride].
__device__ __forceinline__ int64_t StatIndex(const AttnRowMask& m, int64_t t, int64_t i) {
  return i * m.stat_row_stride + t * m.stat_item_stride;
}

// P[i, j] = exp(s_ij - max) / sum for the keys row i sees, 0 beyond; lse = max + log(sum).
__global__ void __launch_bounds__(kRowThreads)
    SoftmaxLseKernel(const float* scores, KPtr p, int64_t p_stride, float* lse, AttnRowMask m) {
  const int64_t r = blockIdx.x, t = r / m.seq, i = r % m.seq, n = Visible(m, i), f = First(m, i);
  const float* row = scores + r * m.keys;
  const int64_t base = t * p_stride + i * m.keys;
  float mx = -INFINITY;
  for (int64_t c = f + threadIdx.x; c < n; c += blockDim.x) mx = fmaxf(mx, row[c]);
  mx = BlockMax(mx);
  float sum = 0;
  for (int64_t c = f + threadIdx.x; c < n; c += blockDim.x) sum += expf(row[c] - mx);
  sum = BlockSum(sum);
  const bool any = f < n;
  const float inv = any ? 1.0f / sum : 0.0f;
  for (int64_t c = threadIdx.x; c < m.keys; c += blockDim.x) {
    Store(p, base + c, c >= f && c < n ? expf(row[c] - mx) * inv : 0.0f);
  }
  if (threadIdx.x == 0) lse[StatIndex(m, t, i)] = any ? mx + logf(sum) : -INFINITY;
}

// P[i, j] = exp(s_ij - lse_i) for the keys row i sees, 0 beyond.
__global__ void __launch_bounds__(kRowThreads)
    ExpMinusLseKernel(const float* scores, KPtr p, int64_t p_stride, const float* lse, AttnRowMask m) {
  const int64_t r = blockIdx.x, t = r / m.seq, i = r % m.seq, n = Visible(m, i), f = First(m, i);
  const float* row = scores + r * m.keys;
  const int64_t base = t * p_stride + i * m.keys;
  const float l = lse[StatIndex(m, t, i)];
  for (int64_t c = threadIdx.x; c < m.keys; c += blockDim.x) {
    Store(p, base + c, c >= f && c < n ? expf(row[c] - l) : 0.0f);
  }
}

// dS[i, j] = P_ij (dP_ij - delta_i) scale for the keys row i sees, 0 beyond. ds may be p (each
// element is read and then written by the same thread).
__global__ void __launch_bounds__(kRowThreads)
    SoftmaxGradDeltaKernel(KPtr p, int64_t p_stride, const float* dp, const float* delta, KPtr ds,
                           int64_t ds_stride, AttnRowMask m, float scale) {
  const int64_t r = blockIdx.x, t = r / m.seq, i = r % m.seq, n = Visible(m, i), f = First(m, i);
  const float* drow = dp + r * m.keys;
  const int64_t pb = t * p_stride + i * m.keys, db = t * ds_stride + i * m.keys;
  const float d = delta[StatIndex(m, t, i)];
  for (int64_t c = threadIdx.x; c < m.keys; c += blockDim.x) {
    Store(ds, db + c, c >= f && c < n ? Load(p, pb + c) * (drow[c] - d) * scale : 0.0f);
  }
}

// One warp per (token, head): delta = sum over the head's D columns of dout * out.
__global__ void AttentionDeltaKernel(KPtr out, KPtr dout, float* delta, int64_t rows, int64_t head_dim) {
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (w >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  float acc = 0;
  for (int64_t c = lane; c < head_dim; c += 32) {
    acc = fmaf(Load(dout, w * head_dim + c), Load(out, w * head_dim + c), acc);
  }
  acc = WarpSum(acc);
  if (lane == 0) delta[w] = acc;
}

__global__ void StatsToTokenMajorKernel(const float* stats, float* lse, int64_t batch, int64_t heads, int64_t seq) {
  PX_GRID_STRIDE(t, batch * heads * seq) {
    const int64_t i = t % seq, bh = t / seq;  // reads coalesced along the sequence
    lse[(i * batch + bh / heads) * heads + bh % heads] = stats[t];
  }
}

}  // namespace

cudaError_t LaunchStatsToTokenMajor(const float* stats, float* lse, int64_t batch, int64_t heads, int64_t seq,
                                    cudaStream_t s) {
  const int64_t n = batch * heads * seq;
  if (n <= 0) return cudaSuccess;
  StatsToTokenMajorKernel<<<GridFor(n, 256), 256, 0, s>>>(stats, lse, batch, heads, seq);
  return cudaGetLastError();
}

cudaError_t LaunchAttentionSoftmax(const float* scores, KPtr p, int64_t p_stride, float* lse, int64_t items,
                                   const AttnRowMask& m, cudaStream_t s) {
  if (items <= 0 || m.seq <= 0 || m.keys <= 0) return cudaSuccess;
  SoftmaxLseKernel<<<static_cast<unsigned>(items * m.seq), kRowThreads, 0, s>>>(scores, p, p_stride, lse, m);
  return cudaGetLastError();
}

cudaError_t LaunchAttentionProbs(const float* scores, KPtr p, int64_t p_stride, const float* lse, int64_t items,
                                 const AttnRowMask& m, cudaStream_t s) {
  if (items <= 0 || m.seq <= 0 || m.keys <= 0) return cudaSuccess;
  ExpMinusLseKernel<<<static_cast<unsigned>(items * m.seq), kRowThreads, 0, s>>>(scores, p, p_stride, lse, m);
  return cudaGetLastError();
}

cudaError_t LaunchAttentionSoftmaxBackward(KPtr p, int64_t p_stride, const float* dp, const float* delta, KPtr ds,
                                           int64_t ds_stride, int64_t items, const AttnRowMask& m, float scale,
                                           cudaStream_t s) {
  if (items <= 0 || m.seq <= 0 || m.keys <= 0) return cudaSuccess;
  SoftmaxGradDeltaKernel<<<static_cast<unsigned>(items * m.seq), kRowThreads, 0, s>>>(p, p_stride, dp, delta, ds,
                                                                                      ds_stride, m, scale);
  return cudaGetLastError();
}

cudaError_t LaunchAttentionDelta(KPtr out, KPtr dout, float* delta, int64_t rows, int64_t head_dim, cudaStream_t s) {
  if (rows <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (rows * 32 + kThreads - 1) / kThreads;
  AttentionDeltaKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(out, dout, delta, rows, head_dim);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu
