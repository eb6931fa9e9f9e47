#pragma once
// Mixture-of-experts and MLA parts of the Megatron-LM and DeepSpeed exports (issue 37 item 6).

#include "model/json_io.h"
#include "model/plan.h"
#include "planner/export/megatron.h"

namespace parallax::planner {

//! Appends Megatron-Core's MoE arguments (--num-experts, --moe-router-topk, --expert-model-parallel-size,
//! --expert-tensor-parallel-size, --moe-ffn-hidden-size, --moe-shared-expert-intermediate-size,
//! --moe-layer-freq, --moe-token-dispatcher-type, ...) and MLA's (--multi-latent-attention, the ranks
//! and head dims); what it cannot express goes to `out.warnings`. Nothing for a dense MHA model.
void AddMegatronMoeArgs(const Plan& plan, MegatronArgs& out);
//! DeepSpeed-MoE's settings under ds["parallax"]["moe"] with a "not_expressible" list.
void AddDeepSpeedMoe(const Plan& plan, Json& ds);

}  // namespace parallax::planner
