#include "profiler/calibrate/measurement.h"

#include <algorithm>
#include <cmath>

namespace parallax::profiler {

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Measurement Summarize(std::vector<double> times_s) {
  Measurement m;
  if (times_s.empty()) return m;
  std::sort(times_s.begin(), times_s.end());
  m.median_s = Quantile(times_s, 0.5);
  m.spread_s = Quantile(times_s, 0.75) - Quantile(times_s, 0.25);
  m.repetitions = static_cast<int64_t>(times_s.size());
  return m;
}

}  // namespace parallax::profiler
