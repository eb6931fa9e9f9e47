// CpuBackend: memory, events and the small vector helpers. Kernel families live in their own files.
#include "executor/cpu/cpu_backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace parallax::executor {

void* CpuBackend::RawAllocate(int64_t bytes) {
  const size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p != nullptr) std::memset(p, 0, rounded);
  return p;
}

void CpuBackend::RawFree(void* p) { std::free(p); }

Event CpuBackend::RecordEvent() {
  return Event{std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
                   .count()};
}

double CpuBackend::ElapsedSeconds(const Event& begin, const Event& end) {
  return static_cast<double>(end.ns - begin.ns) * 1e-9;
}

void CpuBackend::Fill(float* x, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

void CpuBackend::Copy(float* dst, const float* src, int64_t n) {
  if (n > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void CpuBackend::Axpy(float* y, const float* x, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

double CpuBackend::SumSquares(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void CpuBackend::AddBias(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void CpuBackend::BiasBackward(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = dy + r * cols;
    for (int64_t c = 0; c < cols; ++c) dbias[c] += row[c];
  }
}

void CpuBackend::CastToBf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
      y[i] = static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN stays NaN
      continue;
    }
    const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    y[i] = static_cast<uint16_t>((bits + rounding) >> 16);
  }
}

void CpuBackend::CastFromBf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(&y[i], &bits, 4);
  }
}

}  // namespace parallax::executor
