#pragma once
// The measurement loop of `parallax calibrate`, independent of what is measured: each item is a
// callback that runs one op N times and returns N timings (a GEMM through the backend, a
// collective over a communicator). For every item: warm-up runs (discarded), then timed
// repetitions summarized by their median and interquartile range; a point whose spread exceeds
// the limit is measured again (the least noisy attempt is kept); a point that cannot run (out of
// memory at a large shape) is skipped and listed with its reason; a stop flag (SIGINT) ends the
// run with an error so nothing partial is written. Progress with an ETA goes to a ProgressBar.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/cost_db.h"
#include "model/result.h"
#include "profiler/calibrate/measurement.h"
#include "profiler/calibrate/progress_bar.h"

namespace parallax::profiler {

//! Runs the op `n` times and returns each run's seconds (n values). An error skips the point.
using MeasureFn = std::function<Result<std::vector<double>>(int64_t n)>;
//! Stores a finished measurement (appends a CostDb sample).
using RecordFn = std::function<void(const Measurement&)>;

struct CalibrationItem {
  std::string what;         //!< "gemm m=4096 n=4096 k=4096 bf16": progress label and skip list key
  double expected_s = 0;    //!< a guess of one run's seconds, weighting the ETA (0: one unit)
  MeasureFn measure;
  RecordFn record;
};

struct CalibratorOptions {
  int64_t warmup = 3;
  int64_t repetitions = 11;
  double max_relative_spread = 0.10;  //!< (q3 - q1) / median above this is noisy
  int64_t max_remeasures = 2;         //!< extra attempts for a noisy point
  const std::atomic<bool>* stop = nullptr;  //!< set (by a signal handler) to end the run early
};

struct CalibrationReport {
  int64_t measured = 0;
  int64_t remeasured = 0;   //!< points measured again for being noisy
  int64_t still_noisy = 0;  //!< points noisy after every attempt (kept, spread recorded)
  std::vector<SkippedMeasurement> skipped;
};

class Calibrator {
 public:
  explicit Calibrator(CalibratorOptions options) : options_(options) {}

  void Add(CalibrationItem item) { items_.push_back(std::move(item)); }
  size_t size() const { return items_.size(); }
  //! Sum of the items' ETA weights (what a ProgressBar's total should be).
  double TotalWeight() const;

  //! Measures every item in order. An error only when stopped (kIo "interrupted"): the caller
  //! then writes nothing.
  Result<CalibrationReport> Run(ProgressBar* progress = nullptr);

 private:
  double Weight(const CalibrationItem& item) const;
  bool Stopped() const { return options_.stop != nullptr && options_.stop->load(); }

  CalibratorOptions options_;
  std::vector<CalibrationItem> items_;
};

}  // namespace parallax::profiler
