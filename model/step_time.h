#pragma once
// The one measured step time (docs/formats.md "Step times"): what `run`, `trace diff`, `refine`,
// `report` and the scripts call a run's step time. The median of the steps after the first
// kWarmupSteps: the first step pays one-off costs (allocations, page faults, GEMM heuristics,
// communicator setup), and the median ignores a step that another process slowed, which a mean
// does not. The predicted step time is the simulator's (planner/sim/simulator.h); `plan` ranks
// its top layouts by it.

#include <algorithm>
#include <cstdint>
#include <vector>

namespace parallax {

inline constexpr int64_t kWarmupSteps = 1;
//! How outputs name the rule, next to the figure.
inline constexpr const char* kMeasuredStepRule = "median of the steps after the first";

//! The median of `v` (the mean of the middle two for an even count); 0 for none.
template <typename T>
T Median(std::vector<T> v) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

//! Median of `step_times` after the first kWarmupSteps (of all of them when there are no more);
//! 0 for none. Any unit.
template <typename T>
T MeasuredStepTime(const std::vector<T>& step_times) {
  const size_t skip = step_times.size() > static_cast<size_t>(kWarmupSteps) ? static_cast<size_t>(kWarmupSteps) : 0;
  return Median(std::vector<T>(step_times.begin() + static_cast<std::ptrdiff_t>(skip), step_times.end()));
}

}  // namespace parallax
