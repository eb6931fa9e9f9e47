// LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019), forward and backward per row;
// the row loops are the SIMD ones of vector_kernels.cpp.
#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/kernel_threads.h"
#include "executor/cpu/vector_kernels.h"

namespace parallax::executor {

void CpuBackend::LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                  float* rstd, int64_t rows, int64_t cols, float eps) {
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      vec::LayerNormRow(x + r * cols, gamma, beta, y + r * cols, cols, eps, &mean[r], &rstd[r]);
    }
  });
}

void CpuBackend::LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean,
                                   const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                                   int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    vec::LayerNormGradRow(dy + r * cols, x + r * cols, gamma, mean[r], rstd[r], dx + r * cols, dgamma, dbeta, cols,
                          /*accumulate=*/false);
  }
}

void CpuBackend::RmsNormForward(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                                int64_t cols, float eps) {
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) vec::RmsNormRow(x + r * cols, gamma, y + r * cols, cols, eps, &rstd[r]);
  });
}

void CpuBackend::RmsNormBackward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                                 float* dgamma, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    vec::RmsNormGradRow(dy + r * cols, x + r * cols, gamma, rstd[r], dx + r * cols, dgamma, cols,
                        /*accumulate=*/false);
  }
}

}  // namespace parallax::executor
