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

void CpuBackend::BiasGeluForward(const BiasGeluArgs& a) {
  if (!a.bias || !AllF32({a.x, a.bias, a.y})) return Backend::BiasGeluForward(a);
  executor::BiasGeluForward(F(a.x), C(a.bias), F(a.y), a.rows, a.cols);
}

void CpuBackend::BiasGeluBackward(const BiasGeluBackwardArgs& a) {
  if (!a.dbias || !AllF32({a.x, a.dy, a.dx, a.dbias})) return Backend::BiasGeluBackward(a);
  executor::BiasGeluBackward(C(a.x), C(a.dy), F(a.dx), F(a.dbias), a.rows, a.cols);
}

void CpuBackend::ResidualAdd(const ResidualAddArgs& a) {
  if (!AllF32({a.x, a.residual, a.bias, a.out})) return Backend::ResidualAdd(a);
  executor::ResidualAdd(C(a.x), C(a.residual), a.bias ? C(a.bias) : nullptr, F(a.out), a.rows, a.cols);
}

void CpuBackend::ResidualLayerNormForward(const ResidualNormArgs& a) {
  if (!AllF32({a.x, a.residual, a.bias, a.h, a.gamma, a.beta, a.y, a.mean, a.rstd})) {
    return Backend::ResidualLayerNormForward(a);
  }
  executor::ResidualLayerNormForward(C(a.x), C(a.residual), a.bias ? C(a.bias) : nullptr, F(a.h), C(a.gamma),
                                     a.beta ? C(a.beta) : nullptr, F(a.y), F(a.mean), F(a.rstd), a.rows, a.cols,
                                     a.eps);
}

void CpuBackend::ResidualRmsNormForward(const ResidualNormArgs& a) {
  if (!AllF32({a.x, a.residual, a.bias, a.h, a.gamma, a.y, a.rstd})) return Backend::ResidualRmsNormForward(a);
  executor::ResidualRmsNormForward(C(a.x), C(a.residual), a.bias ? C(a.bias) : nullptr, F(a.h), C(a.gamma), F(a.y),
                                   F(a.rstd), a.rows, a.cols, a.eps);
}

void CpuBackend::LayerNormBackwardAdd(const NormBackwardArgs& a) {
  if (!AllF32({a.dy, a.x, a.gamma, a.mean, a.rstd, a.dx, a.dgamma, a.dbeta})) {
    return Backend::LayerNormBackwardAdd(a);
  }
  executor::LayerNormBackwardAdd(C(a.dy), C(a.x), C(a.gamma), C(a.mean), C(a.rstd), F(a.dx), F(a.dgamma),
                                 a.dbeta ? F(a.dbeta) : nullptr, a.rows, a.cols);
}

void CpuBackend::RmsNormBackwardAdd(const NormBackwardArgs& a) {
  if (!AllF32({a.dy, a.x, a.gamma, a.rstd, a.dx, a.dgamma})) return Backend::RmsNormBackwardAdd(a);
  executor::RmsNormBackwardAdd(C(a.dy), C(a.x), C(a.gamma), C(a.rstd), F(a.dx), F(a.dgamma), a.rows, a.cols);
}

}  // namespace parallax::executor
