// CpuBackend: memory, host copies and the small vector helpers. Kernel families live in their own
// files; the typed (mixed-precision) entry points in typed_kernels.cpp.
#include "executor/cpu/cpu_backend.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "executor/cpu/kernel_threads.h"
#include "executor/cpu/vector_kernels.h"
#include "executor/cpu/wait_policy.h"
#include "executor/host_threads.h"
#include "executor/launch.h"

namespace parallax::executor {

void* CpuBackend::RawAllocate(int64_t bytes) {
  const size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded);
}

// The caching allocator's raw interface: aligned_alloc's memory is released with free.
void CpuBackend::RawFree(void* p) { std::free(p); }  // NOLINT(cppcoreguidelines-no-malloc)

int64_t CpuBackend::DeviceMemoryBytes() const {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{1} << 40;
}

Result<std::unique_ptr<Communicator>> CpuBackend::ConnectWorld(LaunchContext& launch, double timeout_s) {
  return launch.World(timeout_s);
}

CpuBackend::CpuBackend() { openblas_set_num_threads(1); }

void CpuBackend::UseHostThreads(const HostThreads& t) {
  openblas_set_num_threads(1);  // our GEMMs use the kernel threads (gemm.cpp)
  SetKernelThreads(t.threads);
  SetWaitPolicy(t.oversubscribed ? WaitPolicy::Oversubscribed() : WaitPolicy::Dedicated());
}

int64_t CpuBackend::IntraOpThreads() const { return KernelThreads(); }

namespace {

float LoadAsFloat(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBf16: return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return F16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kI32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case DType::kF64: return static_cast<float>(static_cast<const double*>(p)[i]);
    case DType::kE4M3:
    case DType::kE5M2: return Fp8ToFloat(static_cast<const uint8_t*>(p)[i], Fp8FormatOf(t));
  }
  return 0;
}

}  // namespace

void ConvertElements(void* dst, DType dt, const void* src, DType st, int64_t n) {
  if (dt == st) {
    std::memmove(dst, src, static_cast<size_t>(n * SizeOf(dt)));
    return;
  }
  // The casts every bf16 kernel call makes (operands widened to fp32 scratch, outputs rounded
  // back): vectorised and spread over the kernel threads; elementwise, so bit-identical.
  constexpr int64_t kCastGrain = 1 << 16;
  if (dt == DType::kF32 && st == DType::kBf16) {
    ParallelFor(n, kCastGrain, [&](int64_t b, int64_t e) {
      vec::Bf16ToF32(static_cast<const uint16_t*>(src) + b, static_cast<float*>(dst) + b, e - b);
    });
    return;
  }
  if (dt == DType::kBf16 && st == DType::kF32) {
    ParallelFor(n, kCastGrain, [&](int64_t b, int64_t e) {
      vec::F32ToBf16(static_cast<const float*>(src) + b, static_cast<uint16_t*>(dst) + b, e - b);
    });
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    switch (dt) {
      case DType::kF32: static_cast<float*>(dst)[i] = LoadAsFloat(src, st, i); break;
      case DType::kBf16: static_cast<uint16_t*>(dst)[i] = FloatToBf16(LoadAsFloat(src, st, i)); break;
      case DType::kF16: static_cast<uint16_t*>(dst)[i] = FloatToF16(LoadAsFloat(src, st, i)); break;
      case DType::kI32:
        static_cast<int32_t*>(dst)[i] = st == DType::kF64 ? static_cast<int32_t>(static_cast<const double*>(src)[i])
                                                          : static_cast<int32_t>(LoadAsFloat(src, st, i));
        break;
      case DType::kF64:
        static_cast<double*>(dst)[i] = st == DType::kI32 ? static_cast<const int32_t*>(src)[i] : LoadAsFloat(src, st, i);
        break;
      case DType::kE4M3:
      case DType::kE5M2:
        static_cast<uint8_t*>(dst)[i] = FloatToFp8(LoadAsFloat(src, st, i), Fp8FormatOf(dt));
        break;
    }
  }
}

void CpuBackend::CopyToDevice(DevPtr dst, const void* host, DType host_type, int64_t count) {
  if (count > 0) ConvertElements(dst.ptr, dst.dtype, host, host_type, count);
}

void CpuBackend::CopyToHost(void* host, DType host_type, DevPtr src, int64_t count) {
  if (count > 0) ConvertElements(host, host_type, src.ptr, src.dtype, count);
}

void CpuBackend::CopyBytesToHost(void* host, DevPtr src, int64_t count) {
  if (count > 0) std::memcpy(host, src.ptr, static_cast<size_t>(count * SizeOf(src.dtype)));
}

void CpuBackend::CopyBytesToDevice(DevPtr dst, const void* host, int64_t count) {
  if (count > 0) std::memcpy(dst.ptr, host, static_cast<size_t>(count * SizeOf(dst.dtype)));
}

void CpuBackend::Fill(float* x, int64_t n, float value) { vec::Fill(x, n, value); }

void CpuBackend::Copy(float* dst, const float* src, int64_t n) {
  if (n > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void CpuBackend::Axpy(float* y, const float* x, int64_t n, float alpha) { vec::Axpy(y, x, n, alpha); }

double CpuBackend::SumSquares(const float* x, int64_t n) { return vec::SumSquares(x, n); }

void CpuBackend::AddBias(float* y, const float* bias, int64_t rows, int64_t cols) {
  vec::AddBias(y, bias, rows, cols);
}

void CpuBackend::BiasBackward(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  vec::BiasGrad(dy, dbias, rows, cols);
}

void CpuBackend::CastToBf16(const float* x, uint16_t* y, int64_t n) {
  ConvertElements(y, DType::kBf16, x, DType::kF32, n);
}

void CpuBackend::CastFromBf16(const uint16_t* x, float* y, int64_t n) {
  ConvertElements(y, DType::kF32, x, DType::kBf16, n);
}

float* CpuBackend::HalfScratch::Get(int64_t n) {
  if (used_ == bufs_.size()) bufs_.emplace_back();
  std::vector<float>& b = bufs_[used_++];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

}  // namespace parallax::executor
