// Activations (GELU, SwiGLU; SIMD loops in vector_kernels.cpp) and rotary position embedding.
#include <cmath>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/kernel_threads.h"
#include "executor/cpu/vector_kernels.h"

namespace parallax::executor {

// Elements per chunk of the intra-op threads (kernel_threads.h): a multiple of every SIMD width.
constexpr int64_t kGrain = 16384;

void CpuBackend::GeluForward(const float* x, float* y, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { vec::Gelu(x + b, y + b, e - b); });
}

void CpuBackend::GeluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { vec::GeluGrad(x + b, dy + b, dx + b, e - b); });
}

void CpuBackend::SwigluForward(const float* gate, const float* up, float* y, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { vec::Swiglu(gate + b, up + b, y + b, e - b); });
}

void CpuBackend::SwigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                                int64_t n) {
  ParallelFor(n, kGrain,
              [&](int64_t b, int64_t e) { vec::SwigluGrad(gate + b, up + b, dy + b, dgate + b, dup + b, e - b); });
}

void CpuBackend::Rotary(float* x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim,
                        int64_t first_position, bool inverse) {
  const int64_t half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    inv_freq[static_cast<size_t>(j)] =
        static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim)));
  }
  const float sign = inverse ? -1.0f : 1.0f;
  std::vector<float> cos(static_cast<size_t>(half)), sin(static_cast<size_t>(half));
  for (int64_t pos = 0; pos < seq; ++pos) {
    for (int64_t j = 0; j < half; ++j) {
      const float theta = static_cast<float>(first_position + pos) * inv_freq[static_cast<size_t>(j)];
      cos[static_cast<size_t>(j)] = std::cos(theta);
      sin[static_cast<size_t>(j)] = sign * std::sin(theta);
    }
    for (int64_t b = 0; b < batch; ++b) {
      float* row = x + (pos * batch + b) * heads * head_dim;
      for (int64_t h = 0; h < heads; ++h) vec::RotateHalf(row + h * head_dim, cos.data(), sin.data(), half);
    }
  }
}

}  // namespace parallax::executor
