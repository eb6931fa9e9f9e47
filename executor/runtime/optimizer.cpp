#include "executor/runtime/optimizer.h"

#include <algorithm>
#include <cmath>

#include "executor/runtime/tp_ops.h"

namespace parallax::executor {

void AppendGradSquareSpans(RuntimeContext& ctx, const ParamGroup& g, std::vector<DevSpan>* spans) {
  if (!g.counts_in_norm) return;
  const int64_t lo_shard = g.shard_begin(), hi_shard = g.shard_begin() + g.shard_size();
  for (const ParamSpec& p : g.params()) {
    if (p.tp_replicated() && !g.experts && ctx.groups->coords.tp_idx != 0) continue;
    const int64_t lo = std::max(lo_shard, p.offset), hi = std::min(hi_shard, p.offset + p.numel());
    if (lo >= hi) continue;
    spans->push_back(DevSpan{g.grads().at(g.grad_storage_index(lo)), hi - lo});
  }
}

Result<OptimizerResult> OptimizerStep(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, int64_t step) {
  Backend& be = *ctx.backend;
  OptimizerResult r;
  const TrainingSpec& t = ctx.training;
  LossScaler& scaler = ctx.scaler;
  {
    auto s = ctx.rec->OpAt(OpKind::kGradClip, -1, -1, -1, Phase::kOptim);
    std::vector<DevSpan> spans;
    for (const ParamGroup* g : groups) AppendGradSquareSpans(ctx, *g, &spans);
    PX_ASSIGN(Tensor sum, be.AllocateZeroed(1, DType::kF64, MemoryKind::kWorkspace));
    be.MultiTensorSumSquares(spans, sum.ptr());
    double sq = 0;
    be.CopyToHost(&sq, DType::kF64, sum.ptr(), 1);
    PX_TRY(ctx.groups->world->HostAllReduce(&sq, 1, ReduceOp::kSum));
    r.grad_norm = std::sqrt(sq) / scaler.scale;
    if (!std::isfinite(r.grad_norm)) {
      if (!scaler.enabled) {
        return Error{"non-finite gradient norm at step " + std::to_string(step - 1) +
                         " (the loss diverged; lower --lr or use bf16/fp32)",
                     ErrorKind::kInternal};
      }
      // fp16 overflow: skip the step (weights and Adam state untouched) and halve the scale.
      r.skipped = true;
      scaler.scale = std::max(scaler.min_scale, scaler.scale / 2);
      scaler.clean_steps = 0;
      return r;
    }
    r.clip_scale = ClipScale(r.grad_norm, t.grad_clip);
  }
  {
    auto s = ctx.rec->OpAt(OpKind::kOptimizer, -1, -1, -1, Phase::kOptim);
    std::vector<AdamWTensor> tensors;
    for (ParamGroup* g : groups) {
      const int64_t ob = g->opt_begin(), oe = g->opt_begin() + g->opt_size();
      for (const ParamSpec& p : g->params()) {
        const int64_t lo = std::max(ob, p.offset), hi = std::min(oe, p.offset + p.numel());
        if (lo >= hi) continue;
        AdamWTensor a;
        a.main = g->main_at(lo);
        a.grad = g->grads().at(g->grad_storage_index(lo));
        a.m = g->adam_m().at(lo - ob);
        a.v = g->adam_v().at(lo - ob);
        if (g->has_main_copy()) a.model = g->values().at(g->param_storage_index(lo));
        a.n = hi - lo;
        a.decay = p.weight_decay;
        tensors.push_back(a);
      }
    }
    AdamWParams a;
    a.lr = t.lr;
    a.beta1 = t.adam_beta1;
    a.beta2 = t.adam_beta2;
    a.eps = t.adam_eps;
    a.weight_decay = t.weight_decay;
    a.step = step;
    a.grad_scale = r.clip_scale / scaler.scale;
    be.MultiTensorAdamW(tensors, a);
  }
  for (ParamGroup* g : groups) {
    const int64_t stage = g->zero().stage;
    if ((stage != 1 && stage != 2) || g->zero().dp == 1) continue;
    const DevPtr mine = g->values().at(g->shard_begin());
    Communicator& comm = ReductionComm(ctx, g->zero().group);
    PX_TRY(RunCollectiveAt(ctx, OpKind::kDpAllGather, -1, g->stage, g->layer, Phase::kComm,
                           g->padded() * SizeOf(g->compute()), static_cast<int32_t>(g->zero().dp), [&](Stream& s) {
                             return comm.AllGather(mine, g->values().ptr(), g->shard_size(), s);
                           }));
  }
  if (scaler.enabled && ++scaler.clean_steps >= scaler.window) {
    scaler.scale *= 2;
    scaler.clean_steps = 0;
  }
  return r;
}

}  // namespace parallax::executor
