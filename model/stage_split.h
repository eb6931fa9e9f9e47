#pragma once
// How transformer layers are split over model stages (pp * virtual_stages of them). One
// definition for the planner and the executor, so predicted and executed stages hold the same
// layers. Even when the stage count divides the layers; otherwise the last `layers % stages`
// stages take one layer more (stage 0 already holds the embedding and, under 1F1B, the most
// in-flight micro-batches: it is the memory-critical stage).

#include <cstdint>

#include "model/plan.h"

namespace parallax {

struct LayerRange {
  int64_t first = 0;  //!< global index of the first layer of the stage
  int64_t count = 0;
  int64_t end() const { return first + count; }
};

//! Layers held by model stage `stage` (0 .. stages-1) when `layers` are split over `stages`.
inline LayerRange StageLayers(int64_t layers, int64_t stages, int64_t stage) {
  const int64_t base = layers / stages;
  const int64_t first_big = stages - layers % stages;  // stages from here on take base + 1
  LayerRange r;
  r.count = base + (stage >= first_big ? 1 : 0);
  r.first = stage * base + (stage > first_big ? stage - first_big : 0);
  return r;
}

//! Model stage count of a layout: pp * virtual_stages.
inline int64_t ModelStages(const Layout& l) { return l.pp * l.virtual_stages; }

}  // namespace parallax
