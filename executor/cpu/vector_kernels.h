#pragma once
// SIMD loops of the CPU kernels, written once with Google Highway and dispatched at run time to
// the widest instruction set the machine has (AVX-512, AVX2, SSE4, or portable 128-bit code), so
// a binary built for baseline x86-64 still runs AVX-512 code where it can.
// exp is Highway's (hwy/contrib/math: max error 1 ulp); GELU is evaluated as x * sigmoid(2u)
// = x / (1 + exp(-2u)), the tanh form rewritten so that it never cancels for negative x.
// Every function is elementwise or per row, so a result never depends on how a caller splits
// its rows or elements (TP, ZeRO shards): the layout tests need exactly that.

#include <algorithm>
#include <cstdint>
#include <vector>

namespace parallax::executor::vec {

//! y = gelu_tanh(x); y may alias x.
void Gelu(const float* x, float* y, int64_t n);
//! dx = dy * gelu_tanh'(x); dx may alias dy.
void GeluGrad(const float* x, const float* dy, float* dx, int64_t n);
//! y = silu(gate) * up.
void Swiglu(const float* gate, const float* up, float* y, int64_t n);
void SwigluGrad(const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n);

//! Rotate-half rotary step on one head: (x1, x2) = (x1 c - x2 s, x2 c + x1 s) with x1 = x[0, half),
//! x2 = x[half, 2 half) and c, s per pair.
void RotateHalf(float* x, const float* cos, const float* sin, int64_t half);

//! max of x[0, n) (n >= 1).
float Max(const float* x, int64_t n);
//! x[i] = exp(x[i] - shift) in place; returns the sum (blocks summed in double).
double ExpShiftSum(float* x, int64_t n, float shift);
//! sum of exp(x[i] - shift), x unchanged (blocks summed in double).
double SumExpShift(const float* x, int64_t n, float shift);
//! y[i] = exp(x[i] - shift) * mul.
void ExpShiftScale(const float* x, float* y, int64_t n, float shift, float mul);
//! x *= s
void Scale(float* x, int64_t n, float s);
//! sum of a[i] * b[i] (blocks summed in double).
double Dot(const float* a, const float* b, int64_t n);
//! Softmax backward in place: dp[i] = p[i] * (dp[i] - sum_j p[j] dp[j]) * scale.
void SoftmaxGrad(const float* p, float* dp, int64_t n, float scale);
//! `count` rows of an attention score block, row r at rows + r ld: columns [Start(r), Len(r)) are
//! the keys it sees, Len(r) = clamp(first_len + r, 0, cap) (causal: one more per row; fully
//! visible: first_len = cap) and Start(r) = clamp(start_base + r start_step, 0, Len(r)) (0 but for
//! local attention: a sliding window moves one key per row, a chunk's start stays); columns
//! [0, Start(r)) and [Len(r), zero_to) are written as zeros so whole rows feed the next GEMM.
struct ScoreRows {
  int64_t ld = 0, first_len = 0, cap = 0, count = 0, zero_to = 0;
  int64_t start_base = 0, start_step = 0;
  int64_t Len(int64_t r) const { return std::clamp<int64_t>(first_len + r, 0, cap); }
  int64_t Start(int64_t r) const { return std::clamp<int64_t>(start_base + r * start_step, 0, Len(r)); }
};
//! Softmax of each row in place; lse[r * lse_stride] = its log-sum-exp (-inf for an empty row).
void SoftmaxRowsLse(float* rows, const ScoreRows& s, float* lse, int64_t lse_stride);
//! rows = exp(rows - lse[r * lse_stride]): the probabilities again from the saved statistics.
void ExpMinusLseRows(float* rows, const ScoreRows& s, const float* lse, int64_t lse_stride);
//! dp = p (dp - delta[r]) scale, delta[r] = rowsum(dout * out) (FlashAttention-2's D).
void SoftmaxGradDeltaRows(const float* p, float* dp, const ScoreRows& s, const float* delta, float scale);
//! y += x
void Add(float* y, const float* x, int64_t n);
//! y += alpha * x (Backend::Axpy).
void Axpy(float* y, const float* x, int64_t n, float alpha);
//! x[i] = value (Backend::Fill).
void Fill(float* x, int64_t n, float value);
//! Sum of squares, float within blocks and double across (Backend::SumSquares).
double SumSquares(const float* x, int64_t n);
//! y[r, :] += bias for each row (Backend::AddBias).
void AddBias(float* y, const float* bias, int64_t rows, int64_t cols);
//! dbias += column sums of dy (Backend::BiasBackward).
void BiasGrad(const float* dy, float* dbias, int64_t rows, int64_t cols);

//! LayerNorm of one row: y = (x - mean) * rstd * gamma + beta (beta may be null).
void LayerNormRow(const float* x, const float* gamma, const float* beta, float* y, int64_t n, float eps, float* mean,
                  float* rstd);
//! Backward of one row: dx = (or += when accumulate) the input gradient; dgamma, dbeta += (dbeta may be null).
void LayerNormGradRow(const float* dy, const float* x, const float* gamma, float mean, float rstd, float* dx,
                      float* dgamma, float* dbeta, int64_t n, bool accumulate);
//! RMSNorm of one row: y = x * rstd * gamma.
void RmsNormRow(const float* x, const float* gamma, float* y, int64_t n, float eps, float* rstd);
void RmsNormGradRow(const float* dy, const float* x, const float* gamma, float rstd, float* dx, float* dgamma,
                    int64_t n, bool accumulate);

//! AdamW update of n elements; the scalars are the ones CpuBackend::AdamW derives from AdamWParams.
struct AdamWScalars {
  float beta1, beta2, step_size, inv_sqrt_bc2, eps, decay, grad_scale;
};
void AdamW(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWScalars& s);

//! fp32 -> bf16 and back, bit for bit as FloatToBf16 / Bf16ToFloat (executor/dtype.h).
void F32ToBf16(const float* x, uint16_t* y, int64_t n);
void Bf16ToF32(const uint16_t* x, float* y, int64_t n);

//! Name of the instruction set the dispatcher chose (for benchmarks and reports).
const char* TargetName();
//! Instruction sets compiled in and supported by this CPU (Highway target bits), so tests can run
//! every kernel on each of them.
std::vector<int64_t> TargetsForTest();
//! Later calls dispatch to `target` (one of TargetsForTest()); 0 restores the run-time choice.
void ForceTargetForTest(int64_t target);

}  // namespace parallax::executor::vec
