#pragma once
// System noise through the backend seam: fixed work quanta (FWQ, LLNL's OS-noise benchmark; the
// method of Petrini et al. SC'03 and Hoefler et al. SC'10). Every rank runs the same short GEMM
// chain back to back at once, each run (a quantum) bracketed by events, for a fixed time. The time
// of w consecutive quanta, less its median over all windows of w, is how much later than a median
// measurement a rank finishes work of that length: its quantiles per window length go to
// CostDb::noise (planner/cost/noise.h uses them).

#include <atomic>
#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "model/cost_db.h"
#include "model/result.h"
#include "profiler/calibrate/backend_timer.h"

namespace parallax::profiler {

struct NoiseOptions {
  double duration_s = 0.5;         //!< time each rank runs quanta
  double quantum_s = 50e-6;        //!< target length of one quantum
  int64_t quantiles = 32;          //!< quantiles stored per window
  executor::DType dtype = executor::DType::kF32;
  const std::atomic<bool>* interrupt = nullptr;
  Turns turns;  //!< ranks that outnumber their CPUs run quanta in turns (backend_timer.h)
};

//! One rank's noise from its quantum times (seconds, in run order): windows of 1, 4, 16, ...
//! quanta while at least 16 windows fit, sliding by a quarter window; per window length the median
//! window time (window_s) and the quantiles of window time - window_s (detour_s, may be negative).
//! Fewer than 16 quanta: nothing (not measured).
SystemNoise NoiseFromQuanta(const std::vector<double>& quanta_s, int64_t quantiles);

//! Collective over `world`: every rank measures at once; the result (the same on every rank) has
//! the ranks' quantiles averaged.
Result<SystemNoise> MeasureNoise(executor::Backend& backend, executor::Communicator& world, const NoiseOptions& o);

}  // namespace parallax::profiler
