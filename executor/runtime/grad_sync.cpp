#include "executor/runtime/grad_sync.h"

namespace parallax::executor {

Status ReduceSequenceParallelGrads(RuntimeContext& ctx, ParamGroup& g, float* full_grads) {
  if (!ctx.sp) return {};
  for (const ParamSpec& p : g.params()) {
    if (!p.sequence_parallel_partial) continue;
    auto s = ctx.rec->OpAt(OpKind::kTpAllReduce, ctx.rec->where().microbatch, g.stage, g.layer, Phase::kBwd,
                           p.numel() * 4, static_cast<int32_t>(ctx.tp));
    if (Status st = ctx.tp_comm().AllReduce(full_grads + p.offset, p.numel(), ReduceOp::kSum); !st) return st;
  }
  return {};
}

Status FlushMicrobatchGrads(RuntimeContext& ctx, ParamGroup& g) {
  if (!g.has_transient_grad()) return {};
  if (Status s = ReduceSequenceParallelGrads(ctx, g, g.transient_grads()); !s) return s;
  const int64_t n = g.shard_size();
  if (g.zero().dp == 1) {
    ctx.backend->Axpy(g.grads_storage(), g.transient_grads(), n, 1.0f);
  } else {
    Buffer part = ctx.backend->AllocateFloats(n, MemoryKind::kGradients);
    {
      auto s = ctx.rec->OpAt(OpKind::kDpReduceScatter, ctx.rec->where().microbatch, g.stage, g.layer, Phase::kComm,
                             g.padded() * 4, static_cast<int32_t>(g.zero().dp));
      if (Status st = ctx.dp_comm().ReduceScatter(g.transient_grads(), part.f32(), n); !st) return st;
    }
    ctx.backend->Axpy(g.grads_storage(), part.f32(), n, 1.0f);
  }
  g.FreeTransientGrads();
  return {};
}

Status StartGradSync(RuntimeContext& ctx, ParamGroup& g) {
  if (Status s = ReduceSequenceParallelGrads(ctx, g, g.grads_storage()); !s) return s;
  if (g.zero().dp == 1) return {};
  // ZeRO-1 as Megatron's distributed optimizer: each rank only needs the sum of its own shard.
  auto req = g.zero().stage == 0
                 ? ctx.dp_comm().IAllReduce(g.grads_storage(), g.padded())
                 : ctx.dp_comm().IReduceScatter(g.grads_storage(), g.grads_storage() + g.shard_begin(),
                                                g.shard_size());
  if (!req) return req.error();
  g.pending_sync = std::move(req).value();
  return {};
}

Status FinishGradSync(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, ParamGroup* tied_words) {
  for (ParamGroup* g : groups) {
    if (!g->pending_sync) continue;
    const OpKind op = g->zero().stage == 0 ? OpKind::kDpAllReduce : OpKind::kDpReduceScatter;
    auto s = ctx.rec->OpAt(op, -1, g->stage, g->layer, Phase::kComm, g->padded() * 4,
                           static_cast<int32_t>(g->zero().dp));
    Status st = g->pending_sync->Wait();
    g->pending_sync.reset();
    if (!st) return st;
  }
  if (tied_words != nullptr && ctx.groups->embedding) {
    // Megatron's embedding group: first and last stage hold copies of the tied word embedding.
    auto s = ctx.rec->OpAt(OpKind::kPpSend, -1, tied_words->stage, -1, Phase::kComm,
                           tied_words->grads_storage_size() * 4, 2);
    if (Status st = ctx.groups->embedding->AllReduce(tied_words->grads_storage(), tied_words->grads_storage_size(),
                                                     ReduceOp::kSum);
        !st) {
      return st;
    }
  }
  return {};
}

}  // namespace parallax::executor
