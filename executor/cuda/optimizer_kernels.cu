// Multi-tensor AdamW (Loshchilov & Hutter 2019, algorithm 2; bias correction as Kingma & Ba 2015)
// and multi-tensor sum of squares, in the style of apex's multi_tensor_apply: up to
// kMultiTensorMax tensor descriptions travel as kernel parameters, each block takes one chunk of
// one tensor. The AdamW arithmetic is the CPU backend's (vector_kernels.cpp AdamWImpl) step for
// step; the sum of squares writes one fp64 partial per block and a single block adds the partials
// in order (deterministic; non-finite values propagate).
#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

struct AdamWBatch {
  AdamWItem items[kMultiTensorMax];
  int64_t block_start[kMultiTensorMax + 1];
  int count;
  AdamWScalars sc;
};

struct SpanBatch {
  SpanItem items[kMultiTensorMax];
  int64_t block_start[kMultiTensorMax + 1];
  int count;
};

template <class Batch>
__device__ __forceinline__ int TensorOfBlock(const Batch& b, int64_t block) {
  int t = 0;
  while (t + 1 < b.count && b.block_start[t + 1] <= block) ++t;
  return t;
}

__global__ void AdamWKernel(const AdamWBatch batch) {
  const int64_t block = blockIdx.x;
  const int t = TensorOfBlock(batch, block);
  const AdamWItem& it = batch.items[t];
  const int64_t begin = (block - batch.block_start[t]) * kMultiTensorChunk;
  const int64_t end = begin + kMultiTensorChunk < it.n ? begin + kMultiTensorChunk : it.n;
  const AdamWScalars& s = batch.sc;
  const float ob1 = 1.0f - s.beta1, ob2 = 1.0f - s.beta2;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float g = it.grad[i] * s.grad_scale;
    const float m = fmaf(s.beta1, it.m[i], ob1 * g);
    const float v = fmaf(s.beta2, it.v[i], ob2 * (g * g));
    const float denom = fmaf(sqrtf(v), s.inv_sqrt_bc2, s.eps);
    const float p = fmaf(-s.step_size, m / denom, it.main[i] * it.decay);
    it.m[i] = m;
    it.v[i] = v;
    it.main[i] = p;
    if (it.model.p != nullptr) Store(it.model, i, p);
  }
}

__global__ void SumSquaresKernel(const SpanBatch batch, double* partials) {
  const int64_t block = blockIdx.x;
  const int t = TensorOfBlock(batch, block);
  const SpanItem& it = batch.items[t];
  const int64_t begin = (block - batch.block_start[t]) * kMultiTensorChunk;
  const int64_t end = begin + kMultiTensorChunk < it.n ? begin + kMultiTensorChunk : it.n;
  double s = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float x = Load(it.p, i);
    s += static_cast<double>(x * x);
  }
  s = BlockSum(s);
  if (threadIdx.x == 0) partials[block] = s;
}

__global__ void SumPartialsKernel(const double* partials, int64_t n, double* out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += partials[i];
  s = BlockSum(s);
  if (threadIdx.x == 0) out[0] += s;
}

int64_t Chunks(int64_t n) { return (n + kMultiTensorChunk - 1) / kMultiTensorChunk; }

}  // namespace

cudaError_t LaunchAdamW(const AdamWItem* items, int count, const AdamWScalars& sc, cudaStream_t s) {
  int i = 0;
  while (i < count) {
    AdamWBatch b{};
    b.sc = sc;
    b.count = 0;
    int64_t blocks = 0;
    for (; i < count && b.count < kMultiTensorMax; ++i) {
      if (items[i].n <= 0) continue;
      b.items[b.count] = items[i];
      b.block_start[b.count] = blocks;
      blocks += Chunks(items[i].n);
      ++b.count;
    }
    if (b.count == 0) continue;
    b.block_start[b.count] = blocks;
    AdamWKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(b);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

int64_t SumSquaresBlocks(const SpanItem* items, int count) {
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) blocks += items[i].n > 0 ? Chunks(items[i].n) : 0;
  return blocks;
}

cudaError_t LaunchSumSquaresPartials(const SpanItem* items, int count, double* partials, cudaStream_t s) {
  int64_t offset = 0;
  int i = 0;
  while (i < count) {
    SpanBatch b{};
    b.count = 0;
    int64_t blocks = 0;
    for (; i < count && b.count < kMultiTensorMax; ++i) {
      if (items[i].n <= 0) continue;
      b.items[b.count] = items[i];
      b.block_start[b.count] = blocks;
      blocks += Chunks(items[i].n);
      ++b.count;
    }
    if (b.count == 0) continue;
    b.block_start[b.count] = blocks;
    SumSquaresKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(b, partials + offset);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    offset += blocks;
  }
  return cudaSuccess;
}

cudaError_t LaunchSumPartials(const double* partials, int64_t n, double* out, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  SumPartialsKernel<<<1, 1024, 0, s>>>(partials, n, out);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu
