#pragma once
// One measured point from repeated timed runs: the median (robust to a preempted run) and the
// interquartile range as its spread.

#include <cstdint>
#include <vector>

#include "model/cost_db.h"

namespace parallax::profiler {

struct Measurement {
  double median_s = 0;
  double spread_s = 0;      //!< q3 - q1 (linear interpolation between order statistics)
  int64_t repetitions = 0;  //!< timed runs the median is over
  int64_t remeasured = 0;   //!< how many times the point was measured again for being noisy

  double relative_spread() const { return median_s > 0 ? spread_s / median_s : 0; }
  MeasurementStats stats() const { return {repetitions, spread_s}; }
};

//! Median and interquartile range of `times_s` (empty: all zero).
Measurement Summarize(std::vector<double> times_s);

//! The q-quantile (0..1) of sorted values, linear between order statistics (numpy's default).
double Quantile(const std::vector<double>& sorted, double q);

}  // namespace parallax::profiler
