#include "executor/runtime/cp_attention.h"

#include "model/cp_chunks.h"

namespace parallax::executor {

void RotaryOnChunks(RuntimeContext& ctx, DevPtr x, int64_t heads, int64_t head_dim, bool inverse) {
  Backend& be = *ctx.backend;
  if (ctx.cp == 1) {
    be.Rotary({.x = x, .seq = ctx.seq, .batch = ctx.batch, .heads = heads, .head_dim = head_dim, .inverse = inverse});
    return;
  }
  const int64_t len = CpChunkLength(ctx.seq, ctx.cp);
  for (int64_t half = 0; half < 2; ++half) {
    be.Rotary({.x = x + half * len * ctx.batch * heads * head_dim, .seq = len, .batch = ctx.batch, .heads = heads,
               .head_dim = head_dim, .first_position = CpChunkOf(ctx.cp, ctx.cp_idx, half) * len,
               .inverse = inverse});
  }
}

}  // namespace parallax::executor
