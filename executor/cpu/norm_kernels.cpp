// LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019), forward and backward per row.
#include <cmath>

#include "executor/cpu/cpu_backend.h"

namespace parallax::executor {

void CpuBackend::LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                  float* rstd, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mu = 0;
    for (int64_t c = 0; c < cols; ++c) mu += xr[c];
    mu /= static_cast<double>(cols);
    double var = 0;
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= static_cast<double>(cols);
    const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mu);
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rs * gamma[c] + (beta ? beta[c] : 0.0f);
    mean[r] = m;
    rstd[r] = rs;
  }
}

void CpuBackend::LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean,
                                   const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                                   int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mean[r]) * rstd[r];
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
      dgamma[c] += dyr[c] * xhat;
      if (dbeta) dbeta[c] += dyr[c];
    }
    const float mg = static_cast<float>(sum_g / static_cast<double>(cols));
    const float mgx = static_cast<float>(sum_gx / static_cast<double>(cols));
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mean[r]) * rstd[r];
      dxr[c] = rstd[r] * (dyr[c] * gamma[c] - mg - xhat * mgx);
    }
  }
}

void CpuBackend::RmsNormForward(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                                int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double ms = 0;
    for (int64_t c = 0; c < cols; ++c) ms += static_cast<double>(xr[c]) * xr[c];
    const float rs = static_cast<float>(1.0 / std::sqrt(ms / static_cast<double>(cols) + eps));
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * rs * gamma[c];
    rstd[r] = rs;
  }
}

void CpuBackend::RmsNormBackward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                                 float* dgamma, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    double sum_gx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = xr[c] * rstd[r];
      sum_gx += static_cast<double>(dyr[c]) * gamma[c] * xhat;
      dgamma[c] += dyr[c] * xhat;
    }
    const float mgx = static_cast<float>(sum_gx / static_cast<double>(cols));
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = xr[c] * rstd[r];
      dxr[c] = rstd[r] * (dyr[c] * gamma[c] - xhat * mgx);
    }
  }
}

}  // namespace parallax::executor
