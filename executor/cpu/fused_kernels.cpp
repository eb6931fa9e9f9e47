// Fused elementwise chains (fused_kernels.h): per row, the steps of the chain run back to back on
// data still in L1, with the SIMD loops of vector_kernels.cpp.
#include "executor/cpu/fused_kernels.h"

#include <cstring>

#include "executor/cpu/vector_kernels.h"

namespace parallax::executor {
namespace {

// h = x + residual (+ bias) for one row.
void ResidualRow(const float* x, const float* residual, const float* bias, float* h, int64_t cols) {
  if (h != x) std::memcpy(h, x, static_cast<size_t>(cols) * sizeof(float));
  vec::Add(h, residual, cols);
  if (bias) vec::Add(h, bias, cols);
}

}  // namespace

void BiasGeluForward(float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * cols;
    vec::Add(xr, bias, cols);
    vec::Gelu(xr, y + r * cols, cols);
  }
}

void BiasGeluBackward(const float* x, const float* dy, float* dx, float* dbias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* dxr = dx + r * cols;
    vec::GeluGrad(x + r * cols, dy + r * cols, dxr, cols);
    vec::Add(dbias, dxr, cols);
  }
}

void ResidualLayerNormForward(const float* x, const float* residual, const float* bias, float* h, const float* gamma,
                              const float* beta, float* y, float* mean, float* rstd, int64_t rows, int64_t cols,
                              float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * cols;
    ResidualRow(x + r * cols, residual + r * cols, bias, hr, cols);
    vec::LayerNormRow(hr, gamma, beta, y + r * cols, cols, eps, &mean[r], &rstd[r]);
  }
}

void ResidualRmsNormForward(const float* x, const float* residual, const float* bias, float* h, const float* gamma,
                            float* y, float* rstd, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * cols;
    ResidualRow(x + r * cols, residual + r * cols, bias, hr, cols);
    vec::RmsNormRow(hr, gamma, y + r * cols, cols, eps, &rstd[r]);
  }
}

void LayerNormBackwardAdd(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                          float* dresidual, float* dgamma, float* dbeta, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    vec::LayerNormGradRow(dy + r * cols, x + r * cols, gamma, mean[r], rstd[r], dresidual + r * cols, dgamma, dbeta,
                          cols, /*accumulate=*/true);
  }
}

void RmsNormBackwardAdd(const float* dy, const float* x, const float* gamma, const float* rstd, float* dresidual,
                        float* dgamma, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    vec::RmsNormGradRow(dy + r * cols, x + r * cols, gamma, rstd[r], dresidual + r * cols, dgamma, cols,
                        /*accumulate=*/true);
  }
}

}  // namespace parallax::executor
