#include "profiler/refine/launch_floor.h"

namespace parallax::profiler {

LaunchFloor LowerLaunchFloor(const FittedSamples& fitted, double in_use_s, CostDb& db) {
  LaunchFloor f;
  f.in_use_us = in_use_s * 1e6;
  if (!fitted.launch_bound) return f;
  f.bound_us = fitted.launch_bound->per_kernel_s * 1e6;
  f.group = fitted.launch_bound->group;
  if (fitted.launch_s < in_use_s) {
    db.launch_overhead_us = fitted.launch_s * 1e6;
    f.lowered = true;
  }
  return f;
}

}  // namespace parallax::profiler
