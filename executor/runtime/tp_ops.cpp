#include "executor/runtime/tp_ops.h"

namespace parallax::executor {

namespace {

template <class MakeScope>
Status RunOn(RuntimeContext& ctx, OpKind op, bool compute_waits, MakeScope make_scope,
             const std::function<Status(Stream&)>& enqueue) {
  const StreamKind s = StreamKindOf(op);
  PX_TRY(ctx.AfterCompute(s));
  {
    auto scope = make_scope();
    PX_TRY(enqueue(ctx.backend->stream(s)));
  }
  if (compute_waits) PX_TRY(ctx.ComputeAfter(s));
  return {};
}

Result<Tensor> Gather(RuntimeContext& ctx, Tensor x, int64_t cols, int64_t layer) {
  if (!ctx.sp) return x;
  PX_ASSIGN(Tensor out, ctx.Act(ctx.tokens * cols));
  const int64_t n = ctx.local_tokens * cols;
  PX_TRY(RunCollective(ctx, OpKind::kTpAllGather, layer, ctx.tokens * cols * SizeOf(ctx.compute),
                       static_cast<int32_t>(ctx.tp),
                       [&](Stream& s) { return ctx.tp_comm().AllGather(x.ptr(), out.ptr(), n, s); }));
  return out;
}

Result<Tensor> Reduce(RuntimeContext& ctx, Tensor partial, int64_t cols, int64_t layer) {
  if (ctx.tp == 1) return partial;
  const int64_t bytes = ctx.tokens * cols * SizeOf(ctx.compute);
  if (!ctx.sp) {
    PX_TRY(RunCollective(ctx, OpKind::kTpAllReduce, layer, bytes, static_cast<int32_t>(ctx.tp), [&](Stream& s) {
      return ctx.tp_comm().AllReduce(partial.ptr(), ctx.tokens * cols, ReduceOp::kSum, s);
    }));
    return partial;
  }
  PX_ASSIGN(Tensor out, ctx.Act(ctx.local_tokens * cols));
  PX_TRY(RunCollective(ctx, OpKind::kTpReduceScatter, layer, bytes, static_cast<int32_t>(ctx.tp), [&](Stream& s) {
    return ctx.tp_comm().ReduceScatter(partial.ptr(), out.ptr(), ctx.local_tokens * cols, s);
  }));
  return out;
}

}  // namespace

Status RunCollective(RuntimeContext& ctx, OpKind op, int64_t layer, int64_t bytes, int32_t group_size,
                     const std::function<Status(Stream&)>& enqueue, bool compute_waits) {
  return RunOn(ctx, op, compute_waits, [&] { return ctx.rec->Op(op, layer, -1, bytes, group_size); }, enqueue);
}

Status RunCollectiveAt(RuntimeContext& ctx, OpKind op, int64_t microbatch, int64_t stage, int64_t layer, Phase phase,
                       int64_t bytes, int32_t group_size, const std::function<Status(Stream&)>& enqueue,
                       bool compute_waits) {
  return RunOn(ctx, op, compute_waits,
               [&] { return ctx.rec->OpAt(op, microbatch, stage, layer, phase, bytes, group_size); }, enqueue);
}

Result<Tensor> EnterRegion(RuntimeContext& ctx, Tensor x, int64_t cols, int64_t layer) {
  return Gather(ctx, std::move(x), cols, layer);
}

Result<Tensor> EnterRegionBackward(RuntimeContext& ctx, Tensor partial, int64_t cols, int64_t layer) {
  return Reduce(ctx, std::move(partial), cols, layer);
}

Result<Tensor> LeaveRegion(RuntimeContext& ctx, Tensor partial, int64_t cols, int64_t layer) {
  return Reduce(ctx, std::move(partial), cols, layer);
}

Result<Tensor> LeaveRegionBackward(RuntimeContext& ctx, Tensor dy, int64_t cols, int64_t layer) {
  return Gather(ctx, std::move(dy), cols, layer);
}

}  // namespace parallax::executor
