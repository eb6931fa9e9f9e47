#pragma once
// System noise (docs/planner.md "System noise"). Calibrated op times are medians, which leave
// out what the machine adds now and then (the OS, a hypervisor, a device changing clocks). A
// training step pays for it twice:
//  - every op runs, on average, its mean time rather than its median: the mean excess of work of
//    that length over its median;
//  - at a synchronization (a TP collective, the step's grad-norm all-reduce) the group waits for
//    its latest member: the expected maximum over g ranks of the time each took for the work since
//    the last synchronization, less the mean (Petrini et al. SC'03; Hoefler et al. SC'10 show the
//    same amplification of noise at collectives).
// Both come from CostDb::noise: per window length, quantiles of (time - median time) of one rank's
// work of that length (fixed work quanta, `parallax calibrate`). Ranks are taken as independent,
// so the maximum over g ranks follows from one rank's quantiles Q_i (i = 0..n-1, equally likely):
// E[max] = sum_i Q_i ((i+1)^g - i^g) / n^g. Without a measurement both are zero.
// After `parallax refine` the mean excess comes from the run instead (CostDb::run_op_times: its op
// times over their medians, which may be below 1 on a machine that switches speeds); the waits
// still come from the calibrated windows.

#include <cstdint>
#include <utility>
#include <vector>

#include "model/cost_db.h"

namespace parallax::planner {

class NoiseModel {
 public:
  NoiseModel() = default;
  //! `run`: a measured run's mean / median of op times (RunOpTimes), which then gives MeanExcess.
  explicit NoiseModel(const SystemNoise& noise, const RunOpTimes& run = {});

  bool measured() const { return !windows_.empty() || run_mean_over_median_ > 0; }
  //! Mean time above the median of work whose median time is `work_s`: with a measured run,
  //! (mean / median - 1) x work_s (negative when the run's ops were mostly faster than their
  //! medians); else the mean excess per second of the calibrated windows (>= 0), linear in log
  //! length between them, held beyond them.
  double MeanExcess(double work_s) const;
  //! Expected extra wait at a synchronization of `group` ranks after each computed `window_s`:
  //! E[max over the group] - E[one rank]. 0 for group <= 1. Between measured windows: linear in
  //! log window; below the shortest: proportional to the window; beyond the longest: grows as
  //! sqrt(window) (a sum of independent windows).
  double SyncExcess(double window_s, int64_t group) const;
  //! One rank's detour over `window_s` of work less its mean, at quantile `u` in [0, 1): what an
  //! event simulation draws per rank and window (the mean is in MeanExcess). Scaled between and
  //! beyond the measured windows as SyncExcess is. 0 without calibrated windows.
  double Draw(double window_s, double u) const;

 private:
  struct Window {
    double window_s = 0;
    std::vector<double> quantiles;
    double mean = 0;
  };
  //! E[max over `group` draws] - E[draw] at one measured window.
  static double ExcessAt(const Window& w, int64_t group);
  //! Quantile `u` of one window's detours less their mean.
  static double DrawAt(const Window& w, double u);
  //! Index i such that windows_[i-1] < x <= windows_[i], and the log-linear weight of windows_[i].
  std::pair<size_t, double> Bracket(double x) const;
  std::vector<Window> windows_;
  double run_mean_over_median_ = 0;
};

}  // namespace parallax::planner
