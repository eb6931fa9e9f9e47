#pragma once
// What both evaluators predict for one plan, and its JSON form (the `plans[]` entries of
// `parallax plan --json` and the object `parallax simulate --json` prints).

#include <cstdint>

#include "model/json_io.h"
#include "model/plan.h"

namespace parallax::planner {

//! Where pipeline rank 0's step time goes; the five parts sum to step_time_s.
struct Breakdown {
  double compute_s = 0;  //!< busy compute incl. recompute, optimizer and contention slowdown
  double tp_comm_s = 0;  //!< TP collectives (on the critical path)
  double dp_comm_s = 0;  //!< DP collectives not hidden behind compute, grad-norm sync, ZeRO-3 stalls
  double pp_comm_s = 0;  //!< waiting for pipeline sends that compute did not hide
  double bubble_s = 0;   //!< pipeline fill/drain and stage imbalance
};

struct Prediction {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;     //!< model FLOPs (no recompute) per GPU per second / 1e12
  double hardware_tflops_per_gpu = 0;  //!< incl. recomputed work (Megatron's published convention)
  double mfu = 0;                      //!< model_tflops_per_gpu / datasheet peak
  int64_t peak_memory_bytes = 0;
  bool fits = false;
  Breakdown breakdown;
  //! step_time_s is the simulator's (planner/sim), else the closed form's (planner/estimate). The
  //! predicted step time users see is the simulator's (model/step_time.h); the search ranks every
  //! layout by the closed form, then its top layouts by the simulator.
  bool simulated = false;
};

//! Fills the throughput and memory fields from step_time_s and the breakdown.
Prediction FinishPrediction(const Plan& plan, double step_time_s, const Breakdown& breakdown);
Json PredictionToJson(const Prediction& p);
//! {"layout": ..., prediction fields...}
Json PlanEntryJson(const Layout& l, const Prediction& p);

}  // namespace parallax::planner
