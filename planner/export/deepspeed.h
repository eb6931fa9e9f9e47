#pragma once
// `parallax plan --export deepspeed`: a DeepSpeed config JSON (ds_config.json) for a plan.
// DeepSpeed's config has no tensor/pipeline degrees (they come from the Megatron-DeepSpeed
// launcher); they are carried under "parallax" for reference.

#include "model/json_io.h"
#include "model/plan.h"

namespace parallax::planner {

Json ExportDeepSpeed(const Plan& plan);

}  // namespace parallax::planner
