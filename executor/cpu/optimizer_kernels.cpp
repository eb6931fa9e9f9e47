// AdamW (Loshchilov & Hutter 2019, algorithm 2) with bias correction, fp32 state; the element
// loop is the SIMD one of vector_kernels.cpp.
#include <cmath>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/kernel_threads.h"
#include "executor/cpu/vector_kernels.h"

namespace parallax::executor {

void CpuBackend::AdamW(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p) {
  const double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(p.step));
  vec::AdamWScalars s;
  s.beta1 = static_cast<float>(p.beta1);
  s.beta2 = static_cast<float>(p.beta2);
  s.step_size = static_cast<float>(p.lr / bc1);
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  s.eps = static_cast<float>(p.eps);
  s.decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
  s.grad_scale = static_cast<float>(p.grad_scale);
  ParallelFor(n, 16384, [&](int64_t b, int64_t e) { vec::AdamW(param + b, grad + b, m + b, v + b, e - b, s); });
}

}  // namespace parallax::executor
