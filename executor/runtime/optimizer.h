#pragma once
// The optimizer step: global-norm gradient clipping (Pascanu et al. 2013) over every rank's
// gradients (one multi-tensor launch, one readback), fp16 overflow detection from that norm, then
// one multi-tensor AdamW over the range of each group this rank owns (all of it for ZeRO 0, the dp
// shard for ZeRO >= 1) on the fp32 main weights, writing the compute-dtype copy, then ZeRO 1/2
// all-gather the updated compute-dtype parameters, group by group in the order of `groups`
// (ShardedModel::groups(): model/param_groups.h's order, which the simulator's gather follows).

#include <vector>

#include "executor/runtime/context.h"
#include "executor/runtime/param_group.h"

namespace parallax::executor {

struct OptimizerResult {
  double grad_norm = 0;   //!< before clipping (loss scale removed)
  double clip_scale = 1;  //!< factor applied to the gradients
  bool skipped = false;   //!< fp16 overflow: no update this step, loss scale halved
};

//! The factor global-norm clipping applies to gradients of norm `grad_norm` (1 when within `grad_clip`
//! or clipping is off); parameter servers clip with it over all their shards' norm.
inline double ClipScale(double grad_norm, double grad_clip) {
  return grad_clip > 0 && grad_norm > grad_clip ? grad_clip / (grad_norm + 1e-6) : 1.0;
}

//! The gradient ranges this rank contributes to the global norm: its dp shard of each group,
//! TP-replicated parameters only on tp rank 0, the tied embedding's second copy not at all.
void AppendGradSquareSpans(RuntimeContext& ctx, const ParamGroup& g, std::vector<DevSpan>* spans);

//! `step` is 1-based (Adam bias correction).
Result<OptimizerResult> OptimizerStep(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, int64_t step);

}  // namespace parallax::executor
