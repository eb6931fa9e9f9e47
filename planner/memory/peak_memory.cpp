#include "planner/memory/peak_memory.h"

#include <algorithm>

#include "planner/memory/memory_model.h"

namespace parallax::planner {

int64_t FastPeakMemory(const Plan& plan) {
  const int64_t p = plan.layout.pp;
  const int64_t stages = p * plan.layout.virtual_stages;
  const int64_t extra = plan.model.layers % stages;
  int64_t peak = EstimateRankMemory(plan, 0).total;
  if (p > 1) peak = std::max(peak, EstimateRankMemory(plan, p - 1).total);
  if (extra > 0 && p > 2) peak = std::max(peak, EstimateRankMemory(plan, std::max<int64_t>(p - extra, 0)).total);
  return peak;
}

}  // namespace parallax::planner
