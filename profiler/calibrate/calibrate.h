#pragma once
// `parallax calibrate` through the backend seam: every rank of the job measures GEMMs and the
// memory-bound kernel families on its backend at once (profiler/calibrate/calibration_set.h), then
// collectives over every group size the ranks allow (Communicator::Split), then the slowdown of
// compute while a collective runs beside it. The Calibrator loop takes medians after warm-up,
// stores spreads, re-measures noisy points and skips (with the reason) points that cannot run.
// The result is a CostDb and, from the same measurements, a cluster whose device (peak per dtype,
// memory, bandwidth) and links (bandwidth, latency) are measured. Nothing is written here: the
// caller writes atomically once everything is measured.

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "model/cluster_spec.h"
#include "model/cost_db.h"
#include "model/model_spec.h"
#include "profiler/calibrate/calibrator.h"

namespace parallax::profiler {

struct CalibrateOptions {
  const ModelSpec* model = nullptr;  //!< focus the shapes on this model (null: generic grid)
  bool quick = false;
  //! The host each world rank runs on (index = world rank): node spans and ranks per node.
  std::vector<std::string> hosts;
  ClusterSpec base;  //!< the cluster the measured one starts from (names, figures not measured)
  std::FILE* progress = nullptr;  //!< progress bar (rank 0's stderr); null: silent
  const std::atomic<bool>* interrupt = nullptr;  //!< set by SIGINT on any rank: stop, write nothing
  int64_t max_collective_bytes = 0;  //!< 0: 4 MiB quick, 64 MiB full
  //! Rounds the repetitions are taken in across all points (CalibratorOptions::rounds); 0: the
  //! default (kDefaultRounds), more than the repetitions: one run per round.
  int64_t rounds = 0;
};

inline constexpr int64_t kDefaultRounds = 3;

struct CalibrateResult {
  CostDb db;
  ClusterSpec cluster;  //!< measured device and links
  CalibrationReport report;
  double seconds = 0;
  Json summary;  //!< measured peaks, bandwidths, latencies, contention, counts (for --json)
};

//! The planner's contention factor k from an end-to-end overlap measurement: compute of length
//! `compute_s` alone, a collective of `comm_s` alone, and both started together, `both_s` until
//! both end. The planner's overlap model gives both_s = compute_s + comm_s (1 - 1/k), so
//! k = comm_s / (compute_s + comm_s - both_s), kept in [1, kMaxContention]: 1 when the compute
//! hides all of the collective, kMaxContention when it hides (almost) none.
inline constexpr double kMaxContention = 100.0;
double ContentionFromOverlap(double compute_s, double comm_s, double both_s);

//! The streaming bandwidth a CostDb measured: its largest elementwise copy, GB/s (0: none).
double StreamingBandwidthGBps(const CostDb& db);

//! `base` with the figures `db` measured: peak per dtype (the fastest GEMM; for a 16-bit one also
//! the sustained matmul rate where `base` has one) and the streaming bandwidth (hbm_GBps, with
//! dram_fraction 1 and the unfused-attention fractions divided by the old dram_fraction, so their
//! ratio to a streaming kernel stays). A plan without the CostDb then prices a copy of the
//! measured size at the measured time, instead of applying the base's streaming fraction again.
DeviceSpec MeasuredDevice(DeviceSpec base, const CostDb& db);

//! Collective over `world`: every rank calls it with the same options and gets the same result.
Result<CalibrateResult> RunCalibration(executor::Backend& backend, executor::Communicator& world,
                                       const CalibrateOptions& options);

}  // namespace parallax::profiler
