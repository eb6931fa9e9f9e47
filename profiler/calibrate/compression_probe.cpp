#include "profiler/calibrate/compression_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <type_traits>

namespace parallax::profiler {
namespace {

using Clock = std::chrono::steady_clock;
using K = CompressionKernel;
constexpr int64_t kParamElements = 16384;  //!< int8's per-parameter scales: one per this many elements

std::vector<float> Seeded(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

//! Parameters of `per` elements covering n (the last one shorter).
std::vector<executor::FlatParam> Chunks(int64_t n, int64_t per) {
  std::vector<executor::FlatParam> out;
  for (int64_t o = 0; o < n; o += per) out.push_back({o, 1, std::min(per, n - o), false});
  return out;
}

}  // namespace

int64_t CompressionProbe::units() const {
  if (kernel_ == K::kPowerSgdProduct) {
    const auto side = std::max<int64_t>(
        1, std::llround(std::sqrt(static_cast<double>(units_) / static_cast<double>(kCalibratedPowerSgdRank))));
    return side * side * kCalibratedPowerSgdRank;
  }
  if (kernel_ == K::kPowerSgdOrthonormalise) {
    const int64_t r2 = kCalibratedPowerSgdRank * kCalibratedPowerSgdRank;
    return std::max<int64_t>(1, units_ / r2) * r2;
  }
  return units_;
}

void CompressionProbe::Prepare() {
  const int64_t r = kCalibratedPowerSgdRank;
  int64_t n = units_;
  if (kernel_ == K::kPowerSgdProduct) {
    rows_ = cols_ = std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(units()) / static_cast<double>(r))));
    n = rows_ * cols_;
    q_.assign(static_cast<size_t>(cols_ * r), 0.5);
    p_.assign(static_cast<size_t>(rows_ * r), 0.0);
  } else if (kernel_ == K::kPowerSgdOrthonormalise) {
    rows_ = units() / (r * r);
    const std::vector<float> v = Seeded(rows_ * r, 7);
    p_.assign(v.begin(), v.end());
  } else if (kernel_ == K::kTopKAccumulate) {
    // k pairs into a gradient of k / fraction values, at seeded places.
    n = static_cast<int64_t>(std::ceil(static_cast<double>(units_) / kCalibratedTopKFraction));
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<int32_t> at(0, static_cast<int32_t>(n - 1));
    pairs_.resize(static_cast<size_t>(units_));
    for (auto& p : pairs_) p = {at(rng), 0.25f};
  }
  g_ = Seeded(n, 5);
  if (kernel_ == K::kPowerSgdProduct) g0_ = g_;
  sum_.assign(static_cast<size_t>(n), 0.0f);
  error_.assign(static_cast<size_t>(n), 0.0f);
  params_ = Chunks(n, kParamElements);
  if (kernel_ == K::kPowerSgdSplit) {
    const int64_t cols = std::max<int64_t>(1, n / 64);
    params_ = {{0, 63, cols, false}, {63 * cols, 1, std::max<int64_t>(0, n - 63 * cols), false}};
  }
  bf16_.resize(static_cast<size_t>(n));
  executor::EncodeBf16(g_.data(), bf16_.data(), n);
  scales_.resize(params_.size());
  q8_.resize(static_cast<size_t>(n));
  executor::EncodeInt8(params_, g_.data(), scales_.data(), q8_.data(), error_.data());
  if (kernel_ == K::kTopKSelect) pairs_.resize(static_cast<size_t>(TopKCount(kCalibratedTopKFraction, n)));
  prepared_ = true;
}

void CompressionProbe::RunOnce() {
  const auto n = static_cast<int64_t>(g_.size());
  const int64_t r = kCalibratedPowerSgdRank;
  switch (kernel_) {
    case K::kErrorFeedback: executor::AddErrorFeedback(g_.data(), error_.data(), n); return;
    case K::kBf16Encode: executor::EncodeBf16(g_.data(), bf16_.data(), n); return;
    case K::kBf16Accumulate: executor::AccumulateBf16(bf16_.data(), sum_.data(), n); return;
    case K::kInt8Encode: executor::EncodeInt8(params_, g_.data(), scales_.data(), q8_.data(), error_.data()); return;
    case K::kInt8Accumulate: executor::AccumulateInt8(params_, scales_.data(), q8_.data(), sum_.data()); return;
    case K::kTopKSelect:
      executor::SelectTopK(g_.data(), n, static_cast<int64_t>(pairs_.size()), &index_, pairs_.data(), &error_);
      return;
    case K::kTopKAccumulate: executor::AccumulatePairs(pairs_.data(), units_, sum_.data()); return;
    case K::kAverage:
      executor::ZeroForSum(sum_.data(), n);
      executor::DivideByMembers(sum_.data(), n, world_.size());
      return;
    case K::kPowerSgdSplit:
      executor::SplitDense(params_, g_.data(), n, &in_matrix_, &dense_);
      executor::MergeDense(in_matrix_, dense_, g_.data(), error_.data());
      return;
    case K::kPowerSgdProduct:
      executor::PowerSgdP(g_.data(), rows_, cols_, r, q_.data(), p_.data());
      executor::PowerSgdQ(g_.data(), rows_, cols_, r, p_.data(), q_.data());
      executor::PowerSgdApproximate(g_.data(), rows_, cols_, r, p_.data(), q_.data(), error_.data());
      return;
    case K::kPowerSgdOrthonormalise: executor::Orthonormalise(p_.data(), rows_, r); return;
  }
}

void CompressionProbe::Release() {
  prepared_ = false;
  const auto drop = [](auto& v) { std::decay_t<decltype(v)>().swap(v); };
  drop(params_), drop(g_), drop(g0_), drop(sum_), drop(error_), drop(bf16_), drop(scales_), drop(q8_);
  drop(index_), drop(pairs_), drop(in_matrix_), drop(dense_), drop(p_), drop(q_);
}

Result<std::vector<double>> CompressionProbe::Measure(int64_t n) {
  if (!prepared_) Prepare();
  const double per_call = kernel_ == K::kPowerSgdProduct ? 1.0 / 3 : 1.0;  // three products a run
  std::vector<double> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t turn = 0; turn < turns_.count; ++turn) {
      PX_TRY(world_.Barrier());
      if (turn != turns_.mine) continue;
      const auto t0 = Clock::now();
      RunOnce();
      out.push_back(std::chrono::duration<double>(Clock::now() - t0).count() * per_call);
    }
    if (kernel_ == K::kPowerSgdProduct) {
      // Untimed: the same operands every run (unnormalised power iterations would overflow).
      g_ = g0_;
      std::fill(q_.begin(), q_.end(), 0.5);
    }
  }
  return out;
}

}  // namespace parallax::profiler
