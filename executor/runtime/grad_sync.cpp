#include "executor/runtime/grad_sync.h"

#include "executor/runtime/tp_ops.h"
#include "model/param_groups.h"

namespace parallax::executor {
namespace {

int32_t DpSize(const ParamGroup& g) { return static_cast<int32_t>(g.zero().dp); }

// ZeRO 2/3: folds a finished reduce-scatter into the gradient shard and frees its buffers.
Status FoldPending(RuntimeContext& ctx, ParamGroup& g) {
  for (ParamGroup::PendingSync& p : g.pending) {
    if (p.part.empty()) continue;
    PX_TRY(ctx.backend->WaitEvent(StreamKind::kCompute, p.done));
    // Reads the shard and the received part, writes the shard: 12 B per element.
    auto s = ctx.rec->OpAt(OpKind::kGradFold, p.microbatch, g.stage, g.layer, Phase::kComm, 12 * g.shard_size());
    ctx.backend->Axpy({.y = g.grads().ptr(), .x = p.part.ptr(), .n = g.shard_size(), .alpha = 1.0f});
  }
  g.pending.clear();
  return {};
}

}  // namespace

Status ReduceSequenceParallelGrads(RuntimeContext& ctx, ParamGroup& g, const Tensor& full_grads) {
  if (ctx.tp == 1) return {};
  // One all-reduce per partial parameter on the tp stream; the compute stream waits only once.
  bool any = false;
  for (const ParamSpec& p : g.params()) {
    if (!(ctx.sp && p.sequence_parallel_partial) && !p.tp_partial) continue;
    any = true;
    PX_TRY(RunCollectiveAt(
        ctx, OpKind::kTpAllReduce, ctx.rec->where().microbatch, g.stage, g.layer, Phase::kBwd, p.numel() * 4,
        static_cast<int32_t>(ctx.tp),
        [&](Stream& s) { return ctx.tp_comm().AllReduce(full_grads.at(p.offset), p.numel(), ReduceOp::kSum, s); },
        /*compute_waits=*/false));
  }
  if (any) PX_TRY(ctx.ComputeAfter(StreamKind::kTpComm));
  return {};
}

Status FlushMicrobatchGrads(RuntimeContext& ctx, ParamGroup& g) {
  if (!g.has_transient_grad()) return {};
  PX_TRY(ReduceSequenceParallelGrads(ctx, g, g.transient_grads()));
  // kReduceScattersInFlight (model/param_groups.h): the one in flight is folded before the next.
  static_assert(kReduceScattersInFlight == 1, "pending_grad_groups holds the one reduce-scatter in flight");
  for (ParamGroup* other : ctx.pending_grad_groups) PX_TRY(FoldPending(ctx, *other));
  ctx.pending_grad_groups.clear();
  const int64_t n = g.shard_size();
  if (g.zero().dp == 1) {
    auto s = ctx.rec->OpAt(OpKind::kGradFold, ctx.rec->where().microbatch, g.stage, g.layer, Phase::kComm, 12 * n);
    ctx.backend->Axpy({.y = g.grads().ptr(), .x = g.transient_grads().ptr(), .n = n, .alpha = 1.0f});
    g.transient_grads().Reset();
    return {};
  }
  // Asynchronous reduce-scatter on the dp stream (overlapping the next layer's backward); folded
  // into the shard at this group's next flush or before the optimizer.
  ParamGroup::PendingSync p;
  p.microbatch = ctx.rec->where().microbatch;
  p.transient = g.TakeTransientGrads();
  PX_ASSIGN(p.part, ctx.backend->Allocate(n, DType::kF32, MemoryKind::kGradients));
  Communicator& comm = ReductionComm(ctx, g.zero().group);
  PX_TRY(RunCollectiveAt(
      ctx, OpKind::kDpReduceScatter, ctx.rec->where().microbatch, g.stage, g.layer, Phase::kComm, g.padded() * 4,
      DpSize(g), [&](Stream& s) { return comm.ReduceScatter(p.transient.ptr(), p.part.ptr(), n, s); },
      /*compute_waits=*/false));
  p.done = ctx.Mark(StreamKind::kDpComm);
  g.pending.push_back(std::move(p));
  ctx.pending_grad_groups.push_back(&g);
  return {};
}

Status StartGradSync(RuntimeContext& ctx, ParamGroup& g) {
  PX_TRY(ReduceSequenceParallelGrads(ctx, g, g.grads()));
  if (g.zero().dp == 1) return {};
  ParamGroup::PendingSync p;
  DevPtr buf = g.grads().ptr();
  if (ctx.grad_reduce != DType::kF32) {
    // Reduce a low-precision copy (half the bytes on the wire); the sum is widened back after.
    PX_ASSIGN(p.reduce_buffer, ctx.backend->Allocate(g.padded(), ctx.grad_reduce, MemoryKind::kGradients));
    ctx.backend->Copy({.dst = p.reduce_buffer.ptr(), .src = buf, .n = g.padded()});
    buf = p.reduce_buffer.ptr();
  }
  // ZeRO-1 as Megatron's distributed optimizer: each rank only needs the sum of its own shard.
  const bool all_reduce = g.zero().stage == 0;
  const OpKind op = all_reduce ? OpKind::kDpAllReduce : OpKind::kDpReduceScatter;
  Communicator& comm = ReductionComm(ctx, g.zero().group);
  PX_TRY(RunCollectiveAt(
      ctx, op, -1, g.stage, g.layer, Phase::kComm, g.padded() * SizeOf(buf.dtype), DpSize(g),
      [&](Stream& s) {
        return all_reduce ? comm.AllReduce(buf, g.padded(), ReduceOp::kSum, s)
                          : comm.ReduceScatter(buf, buf + g.shard_begin(), g.shard_size(), s);
      },
      /*compute_waits=*/false));
  p.done = ctx.Mark(StreamKind::kDpComm);
  g.pending.push_back(std::move(p));
  return {};
}

Status FinishGradSync(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, ParamGroup* tied_words) {
  for (ParamGroup* g : groups) {
    if (g->zero().stage >= 2) {
      PX_TRY(FoldPending(ctx, *g));
      continue;
    }
    for (ParamGroup::PendingSync& p : g->pending) {
      PX_TRY(ctx.backend->WaitEvent(StreamKind::kCompute, p.done));
      if (!p.reduce_buffer.empty()) {
        const bool all = g->zero().stage == 0;
        const int64_t begin = all ? 0 : g->shard_begin(), n = all ? g->padded() : g->shard_size();
        ctx.backend->Copy({.dst = g->grads().at(begin), .src = p.reduce_buffer.at(begin), .n = n});
      }
    }
    g->pending.clear();
  }
  ctx.pending_grad_groups.clear();
  if (tied_words != nullptr && ctx.groups->embedding) {
    // Megatron's embedding group: the first and last stage hold copies of the tied word embedding
    // (ParamGroupDef::tied_pair); one all-reduce of the gradient over that 2-rank group.
    const int64_t n = tied_words->grads_storage_size();
    PX_TRY(RunCollectiveAt(ctx, OpKind::kDpAllReduce, -1, tied_words->stage, -1, Phase::kComm, n * 4, 2, [&](Stream& s) {
      return ctx.groups->embedding->AllReduce(tied_words->grads().ptr(), n, ReduceOp::kSum, s);
    }));
  }
  return {};
}

}  // namespace parallax::executor
