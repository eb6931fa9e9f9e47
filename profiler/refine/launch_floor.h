#pragma once
// The launch floor after `refine`: the planner charges each compute op at least its kernel count
// x the host launch overhead (planner/cost/layer_ops.h LaunchOverhead): the database's figure
// (calibrate's one-element copy) or, without one, the implementation profile's (a CUDA launch,
// 5 us for our executor). A measured op cannot have spent more per kernel call than its median
// over its kernels (sample_fit.h LaunchBound); where the trace's smallest such bound is below the
// figure in use, the refined database holds the bound (CostDb::launch_overhead_us), so the ops
// the trace sampled are predicted at their samples, not at a floor the run did not pay. Never
// raised: an op longer per kernel than the floor is work, not launches.

#include <optional>
#include <string>

#include "model/cost_db.h"
#include "profiler/refine/sample_fit.h"

namespace parallax::profiler {

struct LaunchFloor {
  double in_use_us = 0;  //!< the per-kernel figure the input database priced with
  double bound_us = 0;   //!< the trace's bound (0: none)
  std::string group;     //!< the op group the bound comes from
  bool lowered = false;  //!< the refined database holds the bound
};

//! Lowers `db.launch_overhead_us` to `fitted`'s bound (FittedSamples::launch_s) where that is
//! below `in_use_s`, the figure the samples were fitted against.
LaunchFloor LowerLaunchFloor(const FittedSamples& fitted, double in_use_s, CostDb& db);

}  // namespace parallax::profiler
