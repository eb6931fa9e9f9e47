#pragma once
// Megatron tensor-parallel region boundaries (Shoeybi et al. 2019; sequence parallelism:
// Korthikanti et al. 2022, section 4.2.2). Activations between regions hold local_tokens rows.
//
//   EnterRegion: [local, H] -> [tokens, H]   fwd: identity / all-gather(seq)
//   LeaveRegion: partial [tokens, H] -> [local, H]   fwd: all-reduce / reduce-scatter(seq)
// and their backward passes (the conjugate collective).

#include "executor/backend.h"
#include "executor/runtime/context.h"

namespace parallax::executor {

//! Forward of the entry: SP gathers the sequence shards; otherwise the activation is already full
//! (returned as a copy-free move of `x`).
Result<Buffer> EnterRegion(RuntimeContext& ctx, Buffer x, int64_t cols, int64_t layer, MemoryKind kind);
//! Backward of the entry: the partial input gradients of the TP ranks are summed
//! (all-reduce, or reduce-scatter to the sequence shard under SP).
Result<Buffer> EnterRegionBackward(RuntimeContext& ctx, Buffer partial, int64_t cols, int64_t layer);
//! Forward of the exit: partial outputs of the TP ranks are summed (all-reduce / reduce-scatter).
Result<Buffer> LeaveRegion(RuntimeContext& ctx, Buffer partial, int64_t cols, int64_t layer);
//! Backward of the exit: SP gathers the gradient shards; otherwise identity.
Result<Buffer> LeaveRegionBackward(RuntimeContext& ctx, Buffer dy, int64_t cols, int64_t layer);

}  // namespace parallax::executor
