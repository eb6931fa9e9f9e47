// Fused elementwise chains (fused_kernels.h): per row, the steps of the chain run back to back on
// data still in L1, with the SIMD loops of vector_kernels.cpp.
#include "executor/cpu/fused_kernels.h"

#include <cstring>
#include <initializer_list>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/kernel_threads.h"
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
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* xr = x + r * cols;
      vec::Add(xr, bias, cols);
      vec::Gelu(xr, y + r * cols, cols);
    }
  });
}

void BiasGeluBackward(const float* x, const float* dy, float* dx, float* dbias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* dxr = dx + r * cols;
    vec::GeluGrad(x + r * cols, dy + r * cols, dxr, cols);
    vec::Add(dbias, dxr, cols);
  }
}

void ResidualAdd(const float* x, const float* residual, const float* bias, float* out, int64_t rows, int64_t cols) {
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ResidualRow(x + r * cols, residual + r * cols, bias, out + r * cols, cols);
  });
}

void ResidualLayerNormForward(const float* x, const float* residual, const float* bias, float* h, const float* gamma,
                              const float* beta, float* y, float* mean, float* rstd, int64_t rows, int64_t cols,
                              float eps) {
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* hr = h + r * cols;
      ResidualRow(x + r * cols, residual + r * cols, bias, hr, cols);
      vec::LayerNormRow(hr, gamma, beta, y + r * cols, cols, eps, &mean[r], &rstd[r]);
    }
  });
}

void ResidualRmsNormForward(const float* x, const float* residual, const float* bias, float* h, const float* gamma,
                            float* y, float* rstd, int64_t rows, int64_t cols, float eps) {
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* hr = h + r * cols;
      ResidualRow(x + r * cols, residual + r * cols, bias, hr, cols);
      vec::RmsNormRow(hr, gamma, y + r * cols, cols, eps, &rstd[r]);
    }
  });
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

// ---- the CPU backend's overrides of the seam's fused chains ------------------------------------

namespace {
bool AllF32(std::initializer_list<DevPtr> ps) {
  for (const DevPtr& p : ps) {
    if (p && p.dtype != DType::kF32) return false;
  }
  return true;
}
float* F(DevPtr p) { return static_cast<float*>(p.ptr); }
const float* C(DevPtr p) { return static_cast<const float*>(p.ptr); }
}  // namespace

void CpuBackend::BiasGeluForward(DevPtr x, DevPtr bias, DevPtr y, int64_t rows, int64_t cols) {
  if (!bias || !AllF32({x, bias, y})) return Backend::BiasGeluForward(x, bias, y, rows, cols);
  executor::BiasGeluForward(F(x), C(bias), F(y), rows, cols);
}

void CpuBackend::BiasGeluBackward(DevPtr x, DevPtr dy, DevPtr dx, DevPtr dbias, int64_t rows, int64_t cols) {
  if (!dbias || !AllF32({x, dy, dx, dbias})) return Backend::BiasGeluBackward(x, dy, dx, dbias, rows, cols);
  executor::BiasGeluBackward(C(x), C(dy), F(dx), F(dbias), rows, cols);
}

void CpuBackend::ResidualAdd(DevPtr x, DevPtr residual, DevPtr bias, DevPtr out, int64_t rows, int64_t cols) {
  if (!AllF32({x, residual, bias, out})) return Backend::ResidualAdd(x, residual, bias, out, rows, cols);
  executor::ResidualAdd(C(x), C(residual), bias ? C(bias) : nullptr, F(out), rows, cols);
}

void CpuBackend::ResidualLayerNormForward(DevPtr x, DevPtr residual, DevPtr bias, DevPtr h, DevPtr gamma,
                                          DevPtr beta, DevPtr y, DevPtr mean, DevPtr rstd, int64_t rows, int64_t cols,
                                          float eps) {
  if (!AllF32({x, residual, bias, h, gamma, beta, y, mean, rstd})) {
    return Backend::ResidualLayerNormForward(x, residual, bias, h, gamma, beta, y, mean, rstd, rows, cols, eps);
  }
  executor::ResidualLayerNormForward(C(x), C(residual), bias ? C(bias) : nullptr, F(h), C(gamma),
                                     beta ? C(beta) : nullptr, F(y), F(mean), F(rstd), rows, cols, eps);
}

void CpuBackend::ResidualRmsNormForward(DevPtr x, DevPtr residual, DevPtr bias, DevPtr h, DevPtr gamma, DevPtr y,
                                        DevPtr rstd, int64_t rows, int64_t cols, float eps) {
  if (!AllF32({x, residual, bias, h, gamma, y, rstd})) {
    return Backend::ResidualRmsNormForward(x, residual, bias, h, gamma, y, rstd, rows, cols, eps);
  }
  executor::ResidualRmsNormForward(C(x), C(residual), bias ? C(bias) : nullptr, F(h), C(gamma), F(y), F(rstd), rows,
                                   cols, eps);
}

Status CpuBackend::LayerNormBackwardAdd(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd, DevPtr dresidual,
                                        DevPtr dgamma, DevPtr dbeta, int64_t rows, int64_t cols) {
  if (!AllF32({dy, x, gamma, mean, rstd, dresidual, dgamma, dbeta})) {
    return Backend::LayerNormBackwardAdd(dy, x, gamma, mean, rstd, dresidual, dgamma, dbeta, rows, cols);
  }
  executor::LayerNormBackwardAdd(C(dy), C(x), C(gamma), C(mean), C(rstd), F(dresidual), F(dgamma),
                                 dbeta ? F(dbeta) : nullptr, rows, cols);
  return {};
}

Status CpuBackend::RmsNormBackwardAdd(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr rstd, DevPtr dresidual, DevPtr dgamma,
                                      int64_t rows, int64_t cols) {
  if (!AllF32({dy, x, gamma, rstd, dresidual, dgamma})) {
    return Backend::RmsNormBackwardAdd(dy, x, gamma, rstd, dresidual, dgamma, rows, cols);
  }
  executor::RmsNormBackwardAdd(C(dy), C(x), C(gamma), C(rstd), F(dresidual), F(dgamma), rows, cols);
  return {};
}

}  // namespace parallax::executor
