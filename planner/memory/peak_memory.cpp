#include "planner/memory/peak_memory.h"

#include <algorithm>

#include "model/schedule.h"
#include "model/stage_split.h"
#include "planner/memory/memory_model.h"

namespace parallax::planner {

namespace {

//! Layers held by pipeline rank `pp_rank` over all its chunks.
int64_t RankLayers(const Layout& l, int64_t layers, int64_t pp_rank) {
  int64_t n = 0;
  for (int64_t chunk = 0; chunk < l.virtual_stages; ++chunk) {
    n += StageLayers(l, layers, ModelStage(l.pp, pp_rank, chunk)).count;
  }
  return n;
}

}  // namespace

int64_t FastPeakMemory(const Plan& plan) {
  const Layout& l = plan.layout;
  const int64_t p = l.pp;
  int64_t peak = EstimateRankMemory(plan, 0).total;
  if (p > 1) peak = std::max(peak, EstimateRankMemory(plan, p - 1).total);
  // The inner ranks hold fewer micro-batches in flight the later they are, and their layer counts
  // only grow (stage_split.h): the peak among them is where the count steps up (the stage after
  // the first under Megatron-Core's embedding-and-loss split).
  int64_t before = p > 2 ? RankLayers(l, plan.model.layers, 0) : 0;
  for (int64_t r = 1; r + 1 < p; ++r) {
    const int64_t here = RankLayers(l, plan.model.layers, r);
    if (here > before) {
      peak = std::max(peak, EstimateRankMemory(plan, r).total);
      break;
    }
    before = here;
  }
  return peak;
}

}  // namespace parallax::planner
