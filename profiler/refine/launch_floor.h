#pragma once
// The launch floor after `refine`: the planner charges each compute op at least its kernel count
// x the host launch overhead (planner/cost/layer_ops.h), the database's figure (calibrate's
// one-element copy) or, without one, the implementation profile's (a CUDA launch, 5 us for our
// executor). A measured op cannot have spent more per kernel call than its time over its kernels
// (sample_fit.h LaunchBound); where the trace's smallest such bound is below the figure in use,
// the refined database holds the bound (CostDb::launch_overhead_us), so the ops the trace sampled
// are predicted at their samples and not at a floor the run did not pay. Never raised.

#include <optional>
#include <string>

#include "model/cost_db.h"
#include "model/plan.h"
#include "profiler/refine/sample_fit.h"

namespace parallax::profiler {

struct LaunchFloor {
  double in_use_us = 0;   //!< the per-kernel floor the input database gave (its own, else the profile's)
  double bound_us = 0;    //!< the trace's bound (0: none)
  std::string group;      //!< the op group the bound comes from
  bool lowered = false;   //!< the refined database holds the bound
};

//! Lowers `db.launch_overhead_us` to the trace's bound where that is below the figure in use for
//! `plan` with `db_in`.
LaunchFloor LowerLaunchFloor(const std::optional<LaunchBound>& bound, const Plan& plan, const CostDb& db_in,
                             CostDb& db);

}  // namespace parallax::profiler
