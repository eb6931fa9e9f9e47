#pragma once
// Element types of backend memory and the non-owning typed reference the seam passes around.
// Host code never dereferences a DevPtr: on an accelerator it is device memory. Host<->backend
// traffic goes through Backend::CopyToDevice / CopyToHost.

#include <cstdint>

namespace parallax::executor {

//! kE4M3 / kE5M2: 8-bit floating point (OCP FP8, executor/fp8.h); FP8 tensors hold codes whose
//! scale lives beside them (Fp8CastArgs, Fp8GemmArgs). A plain cast to or from them is unscaled.
enum class DType : uint8_t { kF32, kBf16, kF16, kI32, kF64, kE4M3, kE5M2 };

inline constexpr int64_t SizeOf(DType t) {
  switch (t) {
    case DType::kBf16:
    case DType::kF16: return 2;
    case DType::kF64: return 8;
    case DType::kE4M3:
    case DType::kE5M2: return 1;
    case DType::kF32:
    case DType::kI32: return 4;
  }
  return 4;
}
const char* ToString(DType t);
inline constexpr bool IsHalf(DType t) { return t == DType::kBf16 || t == DType::kF16; }
inline constexpr bool IsFp8(DType t) { return t == DType::kE4M3 || t == DType::kE5M2; }

//! A typed address in backend memory (not owned). `+ n` moves by n elements of its dtype.
struct DevPtr {
  void* ptr = nullptr;
  DType dtype = DType::kF32;

  DevPtr operator+(int64_t elements) const {
    return DevPtr{static_cast<char*>(ptr) + elements * SizeOf(dtype), dtype};
  }
  explicit operator bool() const { return ptr != nullptr; }
  bool operator==(const DevPtr& o) const { return ptr == o.ptr && dtype == o.dtype; }
};

// Round-to-nearest-even conversions (IEEE 754 binary16; bfloat16 = the top half of binary32).
// NaN stays NaN; overflow rounds to infinity as the hardware casts do.
uint16_t FloatToBf16(float x);
float Bf16ToFloat(uint16_t x);
uint16_t FloatToF16(float x);
float F16ToFloat(uint16_t x);

}  // namespace parallax::executor
