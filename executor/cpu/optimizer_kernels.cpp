// AdamW (Loshchilov & Hutter 2019, algorithm 2) with bias correction, fp32 state.
#include <cmath>

#include "executor/cpu/cpu_backend.h"

namespace parallax::executor {

void CpuBackend::AdamW(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p) {
  const double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(p.step));
  const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2);
  const float step_size = static_cast<float>(p.lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float eps = static_cast<float>(p.eps);
  const float decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
  const float gs = static_cast<float>(p.grad_scale);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * gs;
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    param[i] = param[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}

}  // namespace parallax::executor
