#include "profiler/refine/launch_floor.h"

namespace parallax::profiler {

LaunchFloor LowerLaunchFloor(const std::optional<LaunchBound>& bound, const Plan& plan, const CostDb& db_in,
                             CostDb& db) {
  LaunchFloor f;
  // As planner/cost/layer_ops.cpp's Pricer picks the figure.
  f.in_use_us = db_in.launch_overhead_us > 0 ? db_in.launch_overhead_us : plan.implementation.launch_overhead_us.value;
  if (!bound) return f;
  f.bound_us = bound->per_kernel_s * 1e6;
  f.group = bound->group;
  if (f.bound_us > 0 && f.bound_us < f.in_use_us) {
    db.launch_overhead_us = f.bound_us;
    f.lowered = true;
  }
  return f;
}

}  // namespace parallax::profiler
