// Vocab-parallel embedding (forward with accumulate, deterministic backward) and the local pieces
// of vocab-parallel cross-entropy: row max, (sum_exp, target_logit) of the slice, the slices'
// statistics combined with the loss sum on the device (fp64), and the logits gradient. Formulas as executor/cpu/embedding_loss_kernels.cpp.
#include <cmath>

#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

constexpr int kEmbRowsPerBlock = 128;  // table rows a backward block owns
constexpr int kEmbCols = 128;          // columns per backward block (= its threads)
constexpr int kEmbTokenChunk = 256;    // indices staged in shared memory at a time

__global__ void EmbeddingForwardKernel(const int32_t* index, int64_t n, KPtr table, int64_t vocab_begin,
                                       int64_t table_rows, int64_t hidden, KPtr out, bool accumulate) {
  PX_GRID_STRIDE(i, n * hidden) {
    const int64_t t = i / hidden, c = i % hidden;
    const int64_t r = static_cast<int64_t>(index[t]) - vocab_begin;
    const float v = (r >= 0 && r < table_rows) ? Load(table, r * hidden + c) : 0.0f;
    Store(out, i, accumulate ? Load(out, i) + v : v);
  }
}

// Block (row range, column slice): every thread owns one column of the block's rows and walks the
// tokens in order, so each dtable element is summed by one thread in token order.
__global__ void EmbeddingBackwardKernel(const int32_t* index, int64_t n, KPtr dout, int64_t vocab_begin,
                                        int64_t table_rows, int64_t hidden, KPtr dtable) {
  __shared__ int32_t rows[kEmbTokenChunk];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kEmbRowsPerBlock;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kEmbCols + threadIdx.x;
  for (int64_t t0 = 0; t0 < n; t0 += kEmbTokenChunk) {
    const int64_t count = n - t0 < kEmbTokenChunk ? n - t0 : kEmbTokenChunk;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
      const int64_t r = static_cast<int64_t>(index[t0 + j]) - vocab_begin - row0;
      rows[j] = (r >= 0 && r < kEmbRowsPerBlock && r + row0 < table_rows) ? static_cast<int32_t>(r) : -1;
    }
    __syncthreads();
    if (c >= hidden) continue;
    for (int64_t j = 0; j < count; ++j) {
      const int32_t r = rows[j];
      if (r < 0) continue;
      const int64_t o = (row0 + r) * hidden + c;
      Store(dtable, o, Load(dtable, o) + Load(dout, (t0 + j) * hidden + c));
    }
  }
}

__global__ void RowMaxKernel(KPtr logits, int64_t cols, KPtr row_max) {
  const int64_t row = blockIdx.x;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, Load(logits, row * cols + c));
  m = BlockMax(m);
  if (threadIdx.x == 0) Store(row_max, row, m);
}

__global__ void CrossEntropyStatsKernel(KPtr logits, int64_t cols, KPtr row_max, const int32_t* targets,
                                        int64_t vocab_begin, KPtr sum_exp, KPtr target_logit) {
  const int64_t row = blockIdx.x;
  const float mx = Load(row_max, row);
  double s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += static_cast<double>(expf(Load(logits, row * cols + c) - mx));
  s = BlockSum(s);
  if (threadIdx.x == 0) {
    Store(sum_exp, row, static_cast<float>(s));
    const int64_t t = static_cast<int64_t>(targets[row]) - vocab_begin;
    Store(target_logit, row, (t >= 0 && t < cols) ? Load(logits, row * cols + t) : 0.0f);
  }
}

// One block: each thread combines its rows' slices (as executor/cpu/typed_kernels.cpp), then the
// block sums the rows' losses into loss_sum.
__global__ void CrossEntropyCombineKernel(KPtr stats, int64_t rows, int64_t parts, KPtr row_max, KPtr sum_exp,
                                          double* loss_sum) {
  double loss = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    float m = -INFINITY;
    for (int64_t p = 0; p < parts; ++p) m = fmaxf(m, Load(stats, 3 * rows * p + r));
    double s = 0, target = 0;
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t base = 3 * rows * p;
      s += static_cast<double>(Load(stats, base + rows + r)) * exp(static_cast<double>(Load(stats, base + r)) - m);
      target += static_cast<double>(Load(stats, base + 2 * rows + r));
    }
    const float se = static_cast<float>(s);
    Store(row_max, r, m);
    Store(sum_exp, r, se);
    loss += log(static_cast<double>(se)) + static_cast<double>(m) - target;
  }
  loss = BlockSum(loss);
  if (threadIdx.x == 0) loss_sum[0] += loss;
}

__global__ void CrossEntropyBackwardKernel(KPtr logits, int64_t rows, int64_t cols, KPtr row_max, KPtr sum_exp,
                                           const int32_t* targets, int64_t vocab_begin, float scale, KPtr dlogits) {
  PX_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    float d = expf(Load(logits, i) - Load(row_max, r)) * (scale / Load(sum_exp, r));
    if (static_cast<int64_t>(targets[r]) - vocab_begin == c) d -= scale;
    Store(dlogits, i, d);
  }
}

int RowThreads(int64_t cols) { return cols >= 4096 ? 512 : (cols >= 512 ? 256 : 128); }

}  // namespace

cudaError_t LaunchEmbeddingForward(const int32_t* index, int64_t n, KPtr table, int64_t vocab_begin,
                                   int64_t table_rows, int64_t hidden, KPtr out, bool accumulate, cudaStream_t s) {
  if (n * hidden <= 0) return cudaSuccess;
  EmbeddingForwardKernel<<<GridFor(n * hidden), kThreads, 0, s>>>(index, n, table, vocab_begin, table_rows, hidden,
                                                                   out, accumulate);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBackward(const int32_t* index, int64_t n, KPtr dout, int64_t vocab_begin,
                                    int64_t table_rows, int64_t hidden, KPtr dtable, cudaStream_t s) {
  if (n <= 0 || hidden <= 0 || table_rows <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((table_rows + kEmbRowsPerBlock - 1) / kEmbRowsPerBlock),
                  static_cast<unsigned>((hidden + kEmbCols - 1) / kEmbCols));
  EmbeddingBackwardKernel<<<grid, kEmbCols, 0, s>>>(index, n, dout, vocab_begin, table_rows, hidden, dtable);
  return cudaGetLastError();
}

cudaError_t LaunchRowMax(KPtr logits, int64_t rows, int64_t cols, KPtr row_max, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  RowMaxKernel<<<static_cast<unsigned>(rows), RowThreads(cols), 0, s>>>(logits, cols, row_max);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyStats(KPtr logits, int64_t rows, int64_t cols, KPtr row_max, const int32_t* targets,
                                    int64_t vocab_begin, KPtr sum_exp, KPtr target_logit, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  CrossEntropyStatsKernel<<<static_cast<unsigned>(rows), RowThreads(cols), 0, s>>>(logits, cols, row_max, targets,
                                                                                  vocab_begin, sum_exp, target_logit);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyCombine(KPtr stats, int64_t rows, int64_t parts, KPtr row_max, KPtr sum_exp,
                                      double* loss_sum, cudaStream_t s) {
  if (rows <= 0 || parts <= 0) return cudaSuccess;
  CrossEntropyCombineKernel<<<1, 512, 0, s>>>(stats, rows, parts, row_max, sum_exp, loss_sum);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyBackward(KPtr logits, int64_t rows, int64_t cols, KPtr row_max, KPtr sum_exp,
                                       const int32_t* targets, int64_t vocab_begin, float scale, KPtr dlogits,
                                       cudaStream_t s) {
  if (rows * cols <= 0) return cudaSuccess;
  CrossEntropyBackwardKernel<<<GridFor(rows * cols), kThreads, 0, s>>>(logits, rows, cols, row_max, sum_exp, targets,
                                                                        vocab_begin, scale, dlogits);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu
