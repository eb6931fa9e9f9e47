#include "planner/cost/stage_partition.h"

namespace parallax::planner {

LayerRange StageLayers(int64_t layers, int64_t stages, int64_t stage) {
  const int64_t base = layers / stages;
  const int64_t extra = layers % stages;  // given to the last `extra` stages
  const int64_t first_big = stages - extra;
  LayerRange r;
  r.count = base + (stage >= first_big ? 1 : 0);
  r.first = stage * base + (stage > first_big ? stage - first_big : 0);
  return r;
}

}  // namespace parallax::planner
