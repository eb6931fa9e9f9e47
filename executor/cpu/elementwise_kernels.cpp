// Activations (GELU, SwiGLU) and rotary position embedding.
#include <cmath>
#include <vector>

#include "executor/cpu/cpu_backend.h"

namespace parallax::executor {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoef = 0.044715f;
float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}  // namespace

void CpuBackend::GeluForward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kGeluCoef * v * v * v)));
  }
}

void CpuBackend::GeluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kGeluCoef * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

void CpuBackend::SwigluForward(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * Sigmoid(gate[i]) * up[i];
}

void CpuBackend::SwigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                                int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float s = Sigmoid(g);
    const float silu = g * s;
    dgate[i] = dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
    dup[i] = dy[i] * silu;
  }
}

void CpuBackend::Rotary(float* x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, bool inverse) {
  const int64_t half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    inv_freq[static_cast<size_t>(j)] =
        static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim)));
  }
  const float sign = inverse ? -1.0f : 1.0f;
  for (int64_t pos = 0; pos < seq; ++pos) {
    for (int64_t j = 0; j < half; ++j) {
      const float theta = static_cast<float>(pos) * inv_freq[static_cast<size_t>(j)];
      const float c = std::cos(theta);
      const float s = sign * std::sin(theta);
      for (int64_t b = 0; b < batch; ++b) {
        float* row = x + (pos * batch + b) * heads * head_dim;
        for (int64_t h = 0; h < heads; ++h) {
          float* xh = row + h * head_dim;
          const float x1 = xh[j];
          const float x2 = xh[j + half];
          xh[j] = x1 * c - x2 * s;
          xh[j + half] = x2 * c + x1 * s;
        }
      }
    }
  }
}

}  // namespace parallax::executor
