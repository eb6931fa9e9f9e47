#pragma once
// The planner's view of the layer split: the shared definition in model/stage_split.h.

#include <cstdint>

#include "model/plan.h"
#include "model/stage_split.h"

namespace parallax::planner {

using parallax::LayerRange;
using parallax::StageLayers;
//! Model stage count of a layout: pp * virtual_stages.
inline int64_t ModelStages(const Layout& l) { return l.pp * l.virtual_stages; }

}  // namespace parallax::planner
