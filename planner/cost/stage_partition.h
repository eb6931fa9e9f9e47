#pragma once
// How the transformer layers are split over model stages (pp * virtual_stages of them).
// Even when the stage count divides the layers; otherwise the last `layers % stages` stages take
// one layer more (stage 0 already holds the most in-flight micro-batches under 1F1B, the
// embedding, and is the memory-critical stage). The executor must split the same way.

#include <cstdint>

#include "model/plan.h"

namespace parallax::planner {

struct LayerRange {
  int64_t first = 0;  //!< global index of the first layer of the stage
  int64_t count = 0;
};

//! Layers held by model stage `stage` (0 .. stages-1) when `layers` are split over `stages`.
LayerRange StageLayers(int64_t layers, int64_t stages, int64_t stage);
//! Model stage count of a layout: pp * virtual_stages.
inline int64_t ModelStages(const Layout& l) { return l.pp * l.virtual_stages; }

}  // namespace parallax::planner
