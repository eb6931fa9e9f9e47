#pragma once
// Fused elementwise chains the runtime runs back to back on the CPU backend: each row is read
// once while it sits in L1 instead of once per kernel. Same conventions as executor/backend.h
// (row-major fp32, [rows, cols]); results equal the unfused kernel sequence up to rounding.

#include <cstdint>

namespace parallax::executor {

//! x[r, :] += bias (x keeps the pre-activation for backward), then y = gelu_tanh(x).
void BiasGeluForward(float* x, const float* bias, float* y, int64_t rows, int64_t cols);
//! dx = dy * gelu_tanh'(x) (dx may alias dy); dbias += column sums of dx.
void BiasGeluBackward(const float* x, const float* dy, float* dx, float* dbias, int64_t rows, int64_t cols);

//! out = x + residual (+ bias per row when not null).
void ResidualAdd(const float* x, const float* residual, const float* bias, float* out, int64_t rows, int64_t cols);

//! h = x + residual (+ bias per row when not null), then y = LayerNorm(h) with gamma, beta (beta may
//! be null); mean and rstd saved per row as LayerNormForward does.
void ResidualLayerNormForward(const float* x, const float* residual, const float* bias, float* h, const float* gamma,
                              const float* beta, float* y, float* mean, float* rstd, int64_t rows, int64_t cols,
                              float eps);
//! h = x + residual (+ bias), then y = RMSNorm(h).
void ResidualRmsNormForward(const float* x, const float* residual, const float* bias, float* h, const float* gamma,
                            float* y, float* rstd, int64_t rows, int64_t cols, float eps);

//! LayerNorm backward whose input gradient is added to `dresidual` (the residual stream's
//! gradient, which the norm branch joins); dgamma, dbeta += (dbeta may be null).
void LayerNormBackwardAdd(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                          float* dresidual, float* dgamma, float* dbeta, int64_t rows, int64_t cols);
//! RMSNorm backward added to `dresidual`; dgamma +=.
void RmsNormBackwardAdd(const float* dy, const float* x, const float* gamma, const float* rstd, float* dresidual,
                        float* dgamma, int64_t rows, int64_t cols);

}  // namespace parallax::executor
