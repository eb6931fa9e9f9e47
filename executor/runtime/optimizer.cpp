#include "executor/runtime/optimizer.h"

#include <algorithm>
#include <cmath>

namespace parallax::executor {

double GradSquaresContribution(RuntimeContext& ctx, const ParamGroup& g) {
  if (!g.counts_in_norm) return 0;
  const int64_t lo_shard = g.shard_begin(), hi_shard = g.shard_begin() + g.shard_size();
  double sum = 0;
  for (const ParamSpec& p : g.params()) {
    if (p.tp_replicated() && ctx.groups->coords.tp_idx != 0) continue;
    const int64_t lo = std::max(lo_shard, p.offset), hi = std::min(hi_shard, p.offset + p.numel());
    if (lo >= hi) continue;
    sum += ctx.backend->SumSquares(g.grads_storage() + g.grad_storage_index(lo), hi - lo);
  }
  return sum;
}

Result<OptimizerResult> OptimizerStep(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, int64_t step) {
  OptimizerResult r;
  const TrainingSpec& t = ctx.training;
  {
    auto s = ctx.rec->OpAt(OpKind::kGradClip, -1, -1, -1, Phase::kOptim);
    double sq = 0;
    for (const ParamGroup* g : groups) sq += GradSquaresContribution(ctx, *g);
    if (Status st = ctx.groups->world->AllReduce(&sq, 1, ReduceOp::kSum); !st) return st.error();
    r.grad_norm = std::sqrt(sq);
    if (t.grad_clip > 0 && r.grad_norm > t.grad_clip) r.clip_scale = t.grad_clip / (r.grad_norm + 1e-6);
  }
  {
    auto s = ctx.rec->OpAt(OpKind::kOptimizer, -1, -1, -1, Phase::kOptim);
    for (ParamGroup* g : groups) {
      const int64_t ob = g->opt_begin(), oe = g->opt_begin() + g->opt_size();
      for (const ParamSpec& p : g->params()) {
        const int64_t lo = std::max(ob, p.offset), hi = std::min(oe, p.offset + p.numel());
        if (lo >= hi) continue;
        AdamWParams a;
        a.lr = t.lr;
        a.beta1 = t.adam_beta1;
        a.beta2 = t.adam_beta2;
        a.eps = t.adam_eps;
        a.weight_decay = p.weight_decay ? t.weight_decay : 0.0;
        a.step = step;
        a.grad_scale = r.clip_scale;
        ctx.backend->AdamW(g->params_storage() + g->param_storage_index(lo),
                           g->grads_storage() + g->grad_storage_index(lo), g->adam_m() + (lo - ob),
                           g->adam_v() + (lo - ob), hi - lo, a);
      }
    }
  }
  for (ParamGroup* g : groups) {
    const int64_t stage = g->zero().stage;
    if ((stage != 1 && stage != 2) || g->zero().dp == 1) continue;
    auto s = ctx.rec->OpAt(OpKind::kDpAllGather, -1, g->stage, g->layer, Phase::kComm, g->padded() * 4,
                           static_cast<int32_t>(g->zero().dp));
    float* mine = g->params_storage() + g->shard_begin();
    if (Status st = ctx.dp_comm().AllGather(mine, g->params_storage(), g->shard_size()); !st) return st.error();
  }
  return r;
}

}  // namespace parallax::executor
