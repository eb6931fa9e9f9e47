#include "executor/runtime/param_init.h"

#include <cmath>

namespace parallax::executor {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t ParamKey(int64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return SplitMix64(h ^ SplitMix64(static_cast<uint64_t>(seed)));
}

double UniformAt(uint64_t key, int64_t index) {
  const uint64_t r = SplitMix64(key ^ SplitMix64(static_cast<uint64_t>(index) * 0x632be59bd9b4e019ULL));
  return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);
}

float NormalAt(uint64_t key, int64_t index, float std) {
  const double u1 = UniformAt(key, 2 * index) + 1e-300;
  const double u2 = UniformAt(key, 2 * index + 1);
  return static_cast<float>(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace parallax::executor
