// Ring attention's merge of a key block's partial attention into the running one (Backend::
// AttentionMerge; formula as executor/cpu/typed_kernels.cpp CpuBackend::AttentionMerge).
#include <cmath>

#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

// Two passes: the outputs first (every thread of a (row, head) reads the statistics before they
// change), then the statistics.
__global__ void AttentionMergeOutKernel(KPtr out, const float* lse, KPtr block_out, const float* block_lse,
                                        int64_t row_heads, int64_t head_dim) {
  PX_GRID_STRIDE(i, row_heads * head_dim) {
    const int64_t rh = i / head_dim;
    const float l = lse[rh], b = block_lse[rh], m = fmaxf(l, b);
    if (m == -INFINITY) continue;
    const float merged = m + logf(expf(l - m) + expf(b - m));
    Store(out, i, expf(l - merged) * Load(out, i) + expf(b - merged) * Load(block_out, i));
  }
}

__global__ void AttentionMergeStatsKernel(float* lse, const float* block_lse, int64_t row_heads) {
  PX_GRID_STRIDE(i, row_heads) {
    const float l = lse[i], b = block_lse[i], m = fmaxf(l, b);
    if (m == -INFINITY) continue;
    lse[i] = m + logf(expf(l - m) + expf(b - m));
  }
}

}  // namespace

cudaError_t LaunchAttentionMerge(KPtr out, float* lse, KPtr block_out, const float* block_lse, int64_t rows,
                                 int64_t heads, int64_t head_dim, cudaStream_t s) {
  const int64_t row_heads = rows * heads;
  if (row_heads * head_dim <= 0) return cudaSuccess;
  AttentionMergeOutKernel<<<GridFor(row_heads * head_dim), kThreads, 0, s>>>(out, lse, block_out, block_lse,
                                                                             row_heads, head_dim);
  AttentionMergeStatsKernel<<<GridFor(row_heads), kThreads, 0, s>>>(lse, block_lse, row_heads);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu
