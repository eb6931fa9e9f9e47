#include "executor/runtime/tp_ops.h"

namespace parallax::executor {
namespace {

Result<Buffer> Gather(RuntimeContext& ctx, Buffer x, int64_t cols, int64_t layer, MemoryKind kind) {
  if (!ctx.sp) return x;
  Buffer out = ctx.backend->AllocateFloats(ctx.tokens * cols, kind);
  const int64_t n = ctx.local_tokens * cols;
  auto scope = ctx.rec->Op(OpKind::kTpAllGather, layer, -1, ctx.tokens * cols * 4, static_cast<int32_t>(ctx.tp));
  if (Status s = ctx.tp_comm().AllGather(x.f32(), out.f32(), n); !s) return s.error();
  return out;
}

Result<Buffer> Reduce(RuntimeContext& ctx, Buffer partial, int64_t cols, int64_t layer) {
  if (ctx.tp == 1) return partial;
  if (!ctx.sp) {
    auto scope = ctx.rec->Op(OpKind::kTpAllReduce, layer, -1, ctx.tokens * cols * 4, static_cast<int32_t>(ctx.tp));
    if (Status s = ctx.tp_comm().AllReduce(partial.f32(), ctx.tokens * cols, ReduceOp::kSum); !s) return s.error();
    return partial;
  }
  Buffer out = ctx.backend->AllocateFloats(ctx.local_tokens * cols, partial.kind());
  auto scope =
      ctx.rec->Op(OpKind::kTpReduceScatter, layer, -1, ctx.tokens * cols * 4, static_cast<int32_t>(ctx.tp));
  if (Status s = ctx.tp_comm().ReduceScatter(partial.f32(), out.f32(), ctx.local_tokens * cols); !s) {
    return s.error();
  }
  return out;
}

}  // namespace

Result<Buffer> EnterRegion(RuntimeContext& ctx, Buffer x, int64_t cols, int64_t layer, MemoryKind kind) {
  return Gather(ctx, std::move(x), cols, layer, kind);
}

Result<Buffer> EnterRegionBackward(RuntimeContext& ctx, Buffer partial, int64_t cols, int64_t layer) {
  return Reduce(ctx, std::move(partial), cols, layer);
}

Result<Buffer> LeaveRegion(RuntimeContext& ctx, Buffer partial, int64_t cols, int64_t layer) {
  return Reduce(ctx, std::move(partial), cols, layer);
}

Result<Buffer> LeaveRegionBackward(RuntimeContext& ctx, Buffer dy, int64_t cols, int64_t layer) {
  return Gather(ctx, std::move(dy), cols, layer, MemoryKind::kActivations);
}

}  // namespace parallax::executor
