#pragma once
// The measurement loop of `parallax calibrate`, independent of what is measured: each item is a
// callback that runs one op N times and returns N timings (a GEMM through the backend, a
// collective over a communicator). For every item: warm-up runs (discarded), then timed
// repetitions summarized by their median and interquartile range; a point whose spread exceeds
// the limit is measured again (the least noisy attempt is kept); a point that cannot run (out of
// memory at a large shape) is skipped and listed with its reason; a stop flag (SIGINT) ends the
// run with an error so nothing partial is written. Progress with an ETA goes to a ProgressBar.
//
// Rounds: with `rounds` R > 1 the repetitions of the interleavable items are split into R chunks
// and taken round by round over all of them (round 1: every item's first chunk, round 2: every
// item's second, ...), so each point's median pools runs from R moments spread over the whole
// calibration. A machine whose speed drifts or switches during the calibration (a shared VM, a GPU
// whose clock follows its temperature) then biases every point alike instead of making the points
// measured at a slow moment look slow against the others. Between its chunks an item's buffers are
// released (`release`), so no more than one item's inputs are held at once; each later chunk
// starts with min(warmup, round_warmup) discarded runs. Noisy points are measured again the same way, in
// rounds over the noisy ones. Items that must run in order (one reads what another recorded) are
// marked `interleave = false` and measured after the rounds, one after another as with R = 1.
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
  //! Frees what `measure` prepared (called after each chunk of a rounds run; may be empty). The
  //! next `measure` call prepares again.
  std::function<void()> release;
  //! False: measured after the rounds, all its repetitions at once (its measure reads what an
  //! earlier item recorded).
  bool interleave = true;
};

struct CalibratorOptions {
  int64_t warmup = 3;
  int64_t repetitions = 11;
  double max_relative_spread = 0.10;  //!< (q3 - q1) / median above this is noisy
  int64_t max_remeasures = 2;         //!< extra attempts for a noisy point
  int64_t rounds = 1;                 //!< chunks the repetitions are taken in, across all items
  int64_t round_warmup = 1;           //!< discarded runs before each chunk after an item's first
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

  //! Measures every item: the interleavable ones in rounds, then the others in order; records in
  //! item order within each group. An error only when stopped (kIo "interrupted"): the caller then
  //! writes nothing.
  Result<CalibrationReport> Run(ProgressBar* progress = nullptr);

 private:
  struct Attempt;
  double Weight(const CalibrationItem& item) const;
  double Runs(const CalibrationItem& item) const;  //!< runs of one first attempt, warm-ups included
  double PerRun(const CalibrationItem& item) const;  //!< the ETA weight of one of those runs
  int64_t RoundCount() const;   //!< rounds (1: back to back), at most the repetitions
  int64_t LaterWarmup() const;  //!< discarded runs before each chunk after an item's first
  //! Repetitions of each chunk (sizes differ by at most one, none empty).
  std::vector<int64_t> Chunks() const;
  //! `n` timed runs of `item`; a count other than `n` is an error.
  Result<std::vector<double>> Timed(const CalibrationItem& item, int64_t n) const;
  //! One attempt of every item in `which`, in rounds; fills `out` (failed items get an error).
  Status MeasureInRounds(const std::vector<size_t>& which, bool first, std::vector<Attempt>& out,
                         ProgressBar* progress, double& done);
  bool Stopped() const { return options_.stop != nullptr && options_.stop->load(); }

  CalibratorOptions options_;
  std::vector<CalibrationItem> items_;
};

}  // namespace parallax::profiler
