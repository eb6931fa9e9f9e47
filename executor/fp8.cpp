#include "executor/fp8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace parallax::executor {
namespace {

struct Layout {
  int mantissa_bits;
  int bias;
  uint8_t max_code;  //!< the largest finite value's code without the sign
};

constexpr Layout LayoutOf(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? Layout{3, 7, 0x7e} : Layout{2, 15, 0x7b};
}

}  // namespace

const char* ToString(Fp8Format f) { return f == Fp8Format::kE4M3 ? "e4m3" : "e5m2"; }

uint8_t FloatToFp8(float x, Fp8Format f) {
  const Layout l = LayoutOf(f);
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint8_t sign = (bits >> 31) != 0 ? 0x80 : 0x00;
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | kFp8NaN;
  const float a = std::bit_cast<float>(abs_bits);
  if (a >= Fp8Max(f)) return sign | l.max_code;  // saturate (infinities too)
  const int min_normal_exp = 1 - l.bias;
  if (a < std::ldexp(1.0f, min_normal_exp)) {
    // Subnormal: a multiple of 2^(min_normal_exp - mantissa_bits) (the scaling is exact; nearbyint
    // rounds to nearest even, the default mode); 2^mantissa_bits is the smallest normal, whose code
    // is that same integer.
    return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, l.mantissa_bits - min_normal_exp)));
  }
  // Normal: round binary32's 23-bit mantissa to mantissa_bits, ties to even, on the bits (a carry
  // moves into the exponent, as it should), then rebias the exponent from 127 to l.bias.
  const int shift = 23 - l.mantissa_bits;
  const uint32_t rounded = abs_bits + ((1u << (shift - 1)) - 1u) + ((abs_bits >> shift) & 1u);
  const uint32_t code = (rounded >> shift) - (static_cast<uint32_t>(127 - l.bias) << l.mantissa_bits);
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, l.max_code));
}

float Fp8ToFloat(uint8_t code, Fp8Format f) {
  const Layout l = LayoutOf(f);
  const int exponent_bits = 7 - l.mantissa_bits;
  const int exponent = (code & 0x7f) >> l.mantissa_bits;
  const int mantissa = code & ((1 << l.mantissa_bits) - 1);
  const float sign = (code & 0x80) != 0 ? -1.0f : 1.0f;
  const int all_ones = (1 << exponent_bits) - 1;
  if (f == Fp8Format::kE4M3 && exponent == all_ones && mantissa == (1 << l.mantissa_bits) - 1) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (f == Fp8Format::kE5M2 && exponent == all_ones) {
    return mantissa == 0 ? sign * std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), 1 - l.bias - l.mantissa_bits);
  return sign * std::ldexp(static_cast<float>((1 << l.mantissa_bits) | mantissa), exponent - l.bias - l.mantissa_bits);
}

void DelayedScalingUpdate(float* history, float* scale, float* scale_inv, int64_t count, Fp8Format f,
                          const DelayedScaling& recipe) {
  for (int64_t t = 0; t < count; ++t) DelayedScalingUpdateOne(history, scale, scale_inv, count, t, f, recipe);
}

}  // namespace parallax::executor
