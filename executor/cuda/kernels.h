#pragma once
// Launchers of the CUDA backend's own kernels (the .cu files of this folder). Plain C++17 so
// both nvcc and the host compiler read it. Every launcher enqueues on `stream` and returns the
// launch status (cudaGetLastError), which the backend checks with PX_CUDA_RECORD.
//
// Typed operands travel as KPtr (address + dtype): every kernel loads any float dtype into fp32,
// computes in fp32 (reductions in fp32 trees or fp64 where the CPU backend uses double) and
// rounds its outputs to nearest even, as the CPU backend does (executor/cpu/typed_kernels.cpp).

#include <cuda_runtime.h>

#include <cstdint>

#include "executor/dtype.h"
#include "executor/fp8.h"

namespace parallax::executor::gpu {

struct KPtr {
  void* p = nullptr;
  DType t = DType::kF32;
};
inline KPtr K(DevPtr d) { return KPtr{d.ptr, d.dtype}; }

// ---- elementwise (elementwise_kernels.cu) ---------------------------------------------------
//! dst = src converted (any pair of dtypes; float -> int32 truncates as static_cast does).
cudaError_t LaunchConvert(KPtr dst, KPtr src, int64_t n, cudaStream_t s);
cudaError_t LaunchFill(KPtr x, int64_t n, float value, cudaStream_t s);
//! y += alpha * x
cudaError_t LaunchAxpy(KPtr y, KPtr x, int64_t n, float alpha, cudaStream_t s);
//! y[r, :] += bias
cudaError_t LaunchAddBias(KPtr y, KPtr bias, int64_t rows, int64_t cols, cudaStream_t s);
//! out[c] += sum over rows of x[r, c], rows summed in a fixed order (deterministic).
//! Row chunks a column reduction over rows x cols splits into, so that a tall, narrow reduction
//! (a bias or norm gradient over every token) fills the GPU: about 1024 blocks of 32 columns,
//! at least 64 rows each. Partials: chunks x cols fp32 (two such sets for a norm's gamma and beta).
inline int64_t ColumnChunks(int64_t rows, int64_t cols) {
  const int64_t col_blocks = (cols + 31) / 32;
  const int64_t want = (1024 + col_blocks - 1) / col_blocks;
  const int64_t most = (rows + 63) / 64;
  return want < most ? (want < 1 ? 1 : want) : (most < 1 ? 1 : most);
}
//! out[c] += sum over rows of x[r, c]; `partials` holds ColumnChunks(rows, cols) x cols floats.
cudaError_t LaunchColumnSums(KPtr x, KPtr out, int64_t rows, int64_t cols, float* partials, cudaStream_t s);
//! out[c] += sum over chunks of partials[chunk, c], chunks in order.
cudaError_t LaunchAddColumnPartials(const float* partials, int64_t chunks, int64_t cols, KPtr out, cudaStream_t s);
cudaError_t LaunchGelu(KPtr x, KPtr y, int64_t n, cudaStream_t s);
cudaError_t LaunchGeluBackward(KPtr x, KPtr dy, KPtr dx, int64_t n, cudaStream_t s);
cudaError_t LaunchSwiglu(KPtr gate, KPtr up, KPtr y, int64_t n, cudaStream_t s);
cudaError_t LaunchSwigluBackward(KPtr gate, KPtr up, KPtr dy, KPtr dgate, KPtr dup, int64_t n, cudaStream_t s);
cudaError_t LaunchRotary(KPtr x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, int64_t first_position,
                         bool inverse, cudaStream_t s);

// ---- norms (norm_kernels.cu) -----------------------------------------------------------------
cudaError_t LaunchLayerNormForward(KPtr x, KPtr gamma, KPtr beta, KPtr y, KPtr mean, KPtr rstd, int64_t rows,
                                   int64_t cols, float eps, cudaStream_t s);
//! dx overwritten; dgamma, dbeta (optional) accumulated.
cudaError_t LaunchLayerNormBackward(KPtr dy, KPtr x, KPtr gamma, KPtr mean, KPtr rstd, KPtr dx, KPtr dgamma,
                                    KPtr dbeta, int64_t rows, int64_t cols, float* partials, cudaStream_t s);
cudaError_t LaunchRmsNormForward(KPtr x, KPtr gamma, KPtr y, KPtr rstd, int64_t rows, int64_t cols, float eps,
                                 cudaStream_t s);
//! Norm backward: `partials` holds 2 x ColumnChunks(rows, cols) x cols floats (the parameter
//! gradients' column reductions).
cudaError_t LaunchRmsNormBackward(KPtr dy, KPtr x, KPtr gamma, KPtr rstd, KPtr dx, KPtr dgamma, int64_t rows,
                                  int64_t cols, float* partials, cudaStream_t s);

// ---- attention (attention_kernels.cu; the GEMMs around them in cuda_kernels.cpp) -------------
//! The score rows of a chunk of attention items (AttentionShape's visibility): `seq` rows of `keys`
//! fp32 scores per item, row i seeing keys [0, Visible(i)) (causal: j <= i + offset). A row's fp32
//! statistic (lse, delta) lies at stats[i * stat_row_stride + t * stat_item_stride] for item t.
struct AttnRowMask {
  int64_t seq = 0, keys = 0;
  bool causal = true;
  int64_t offset = 0;
  int64_t stat_row_stride = 0, stat_item_stride = 0;
  int64_t window = 0;  //!< AttentionShape::window (local attention; causal only)
  bool chunked = false;
  int64_t query_start = 0;
};
//! For `items` fp32 score matrices seq x keys (contiguous), the softmax of every row into p (item t at
//! t * p_stride elements, rows of keys; zeros past the visible keys) and its log-sum-exp into lse
//! (-inf for a row that sees no key).
cudaError_t LaunchAttentionSoftmax(const float* scores, KPtr p, int64_t p_stride, float* lse, int64_t items,
                                   const AttnRowMask& m, cudaStream_t s);
//! p = exp(scores - lse): the probabilities again from the forward's statistics.
cudaError_t LaunchAttentionProbs(const float* scores, KPtr p, int64_t p_stride, const float* lse, int64_t items,
                                 const AttnRowMask& m, cudaStream_t s);
//! dS = P (dP - delta) scale (zeros past the visible keys); dp fp32 contiguous. ds may be p.
cudaError_t LaunchAttentionSoftmaxBackward(KPtr p, int64_t p_stride, const float* dp, const float* delta, KPtr ds,
                                           int64_t ds_stride, int64_t items, const AttnRowMask& m, float scale,
                                           cudaStream_t s);
//! lse[(i * batch + b) * heads + h] = stats[(b * heads + h) * seq + i]: cuDNN's [b, h, s, 1] statistics
//! in the seam's [seq*batch, heads] layout.
cudaError_t LaunchStatsToTokenMajor(const float* stats, float* lse, int64_t batch, int64_t heads, int64_t seq,
                                    cudaStream_t s);
//! delta[w] = sum_c dout[w, c] out[w, c] over `rows` rows of head_dim (one per token and head).
cudaError_t LaunchAttentionDelta(KPtr out, KPtr dout, float* delta, int64_t rows, int64_t head_dim, cudaStream_t s);

// ---- embedding and loss (embedding_loss_kernels.cu) --------------------------------------------
cudaError_t LaunchEmbeddingForward(const int32_t* index, int64_t n, KPtr table, int64_t vocab_begin,
                                   int64_t table_rows, int64_t hidden, KPtr out, bool accumulate, cudaStream_t s);
//! Deterministic without sorting: each block owns a range of table rows and a slice of columns
//! and adds the gradients of its tokens in token order.
cudaError_t LaunchEmbeddingBackward(const int32_t* index, int64_t n, KPtr dout, int64_t vocab_begin,
                                    int64_t table_rows, int64_t hidden, KPtr dtable, cudaStream_t s);
cudaError_t LaunchRowMax(KPtr logits, int64_t rows, int64_t cols, KPtr row_max, cudaStream_t s);
cudaError_t LaunchCrossEntropyStats(KPtr logits, int64_t rows, int64_t cols, KPtr row_max, const int32_t* targets,
                                    int64_t vocab_begin, KPtr sum_exp, KPtr target_logit, cudaStream_t s);
//! Backend::CrossEntropyCombine: `parts` slices' [row max | sum_exp | target logit] side by side in
//! `stats`; writes the global row_max and sum_exp, loss_sum[0] (fp64) += sum over rows of
//! log(sum_exp) + row_max - target logit.
cudaError_t LaunchCrossEntropyCombine(KPtr stats, int64_t rows, int64_t parts, KPtr row_max, KPtr sum_exp,
                                      double* loss_sum, cudaStream_t s);
cudaError_t LaunchCrossEntropyBackward(KPtr logits, int64_t rows, int64_t cols, KPtr row_max, KPtr sum_exp,
                                       const int32_t* targets, int64_t vocab_begin, float scale, KPtr dlogits,
                                       cudaStream_t s);

//! Backend::AttentionMerge (attention_merge_kernels.cu): lse and block_lse fp32 [rows, heads].
cudaError_t LaunchAttentionMerge(KPtr out, float* lse, KPtr block_out, const float* block_lse, int64_t rows,
                                 int64_t heads, int64_t head_dim, cudaStream_t s);

// ---- multi-tensor optimizer and norm (optimizer_kernels.cu) ------------------------------------
struct AdamWItem {
  float* main = nullptr;
  const float* grad = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  KPtr model;  //!< p null: no compute-dtype copy
  int64_t n = 0;
  float decay = 1;  //!< 1 - lr * weight_decay, or 1
};
struct AdamWScalars {
  float beta1, beta2, step_size, inv_sqrt_bc2, eps, grad_scale;
};
//! Tensors per launch (their descriptions travel as kernel parameters).
inline constexpr int kMultiTensorMax = 48;
//! Elements per block of the multi-tensor kernels.
inline constexpr int64_t kMultiTensorChunk = 1 << 16;
cudaError_t LaunchAdamW(const AdamWItem* items, int count, const AdamWScalars& sc, cudaStream_t s);
struct SpanItem {
  KPtr p;
  int64_t n = 0;
};
//! Blocks (= fp64 partial sums) the spans need.
int64_t SumSquaresBlocks(const SpanItem* items, int count);
//! partials[0, blocks) = per-block sums of squares of the `count` spans.
cudaError_t LaunchSumSquaresPartials(const SpanItem* items, int count, double* partials, cudaStream_t s);
//! out[0] += sum of partials[0, n), in a fixed order.
cudaError_t LaunchSumPartials(const double* partials, int64_t n, double* out, cudaStream_t s);

// ---- GEMM fallback (gemm_fallback.cu) ----------------------------------------------------------
//! C[b] = alpha op(A[b]) op(B[b]) + beta C[b], row-major, fp32 accumulation: used when cuBLASLt
//! offers no algorithm for a shape (odd leading dimensions of 16-bit matrices).
cudaError_t LaunchGemmFallback(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, KPtr a, int64_t lda,
                               int64_t stride_a, KPtr b, int64_t ldb, int64_t stride_b, float beta, KPtr c,
                               int64_t ldc, int64_t stride_c, int64_t batch, cudaStream_t s);

// ---- FP8 (fp8_kernels.cu) ------------------------------------------------------------------------
//! y (FP8) = x * scale[0], saturating; amax (optional, one fp32) = max(amax, max |x|), NaN first.
cudaError_t LaunchFp8Cast(KPtr x, const float* scale, KPtr y, float* amax, int64_t n, cudaStream_t s);
//! dst (cols x rows, packed) = the transpose of src (rows x cols, leading dimension ld), bytes.
cudaError_t LaunchTransposeBytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t ld, uint8_t* dst,
                                 cudaStream_t s);
//! c = alpha a_scale_inv[0] b_scale_inv[0] acc + beta c over m x n (acc packed fp32): the scaling
//! of an FP8 GEMM that ran through LaunchGemmFallback with alpha 1 and beta 0.
cudaError_t LaunchFp8Epilogue(const float* acc, int64_t m, int64_t n, float alpha, const float* a_scale_inv,
                              const float* b_scale_inv, float beta, KPtr c, int64_t ldc, cudaStream_t s);
//! executor/fp8.h DelayedScalingUpdate on the device, one thread per tensor.
cudaError_t LaunchFp8ScaleUpdate(float* history, float* scale, float* scale_inv, int64_t count, Fp8Format f,
                                 const DelayedScaling& recipe, cudaStream_t s);

}  // namespace parallax::executor::gpu
