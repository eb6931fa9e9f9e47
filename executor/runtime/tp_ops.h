#pragma once
// Megatron tensor-parallel region boundaries (Shoeybi et al. 2019; sequence parallelism:
// Korthikanti et al. 2022, section 4.2.2). Activations between regions hold local_tokens rows.
//
//   EnterRegion: [local, H] -> [tokens, H]   fwd: identity / all-gather(seq)
//   LeaveRegion: partial [tokens, H] -> [local, H]   fwd: all-reduce / reduce-scatter(seq)
// and their backward passes (the conjugate collective). Every collective runs on the op's comm
// stream after the compute that produced its input, and the compute stream waits for it.

#include <functional>

#include "executor/backend.h"
#include "executor/runtime/context.h"

namespace parallax::executor {

//! Runs `enqueue` (collectives on the given stream) as recorded op `op` on its stream, after the
//! compute stream's work so far; with `compute_waits` the compute stream then waits for it.
Status RunCollective(RuntimeContext& ctx, OpKind op, int64_t layer, int64_t bytes, int32_t group_size,
                     const std::function<Status(Stream&)>& enqueue, bool compute_waits = true);
//! The same with an explicit identity (micro-batch, stage, phase), for DP and SP-gradient syncs.
Status RunCollectiveAt(RuntimeContext& ctx, OpKind op, int64_t microbatch, int64_t stage, int64_t layer, Phase phase,
                       int64_t bytes, int32_t group_size, const std::function<Status(Stream&)>& enqueue,
                       bool compute_waits = true);

//! Forward of the entry: SP gathers the sequence shards; otherwise the activation is already full
//! (returned as a copy-free move of `x`).
Result<Tensor> EnterRegion(RuntimeContext& ctx, Tensor x, int64_t cols, int64_t layer);
//! Backward of the entry: the partial input gradients of the TP ranks are summed
//! (all-reduce, or reduce-scatter to the sequence shard under SP).
Result<Tensor> EnterRegionBackward(RuntimeContext& ctx, Tensor partial, int64_t cols, int64_t layer);
//! Forward of the exit: partial outputs of the TP ranks are summed (all-reduce / reduce-scatter).
Result<Tensor> LeaveRegion(RuntimeContext& ctx, Tensor partial, int64_t cols, int64_t layer);
//! Backward of the exit: SP gathers the gradient shards; otherwise identity.
Result<Tensor> LeaveRegionBackward(RuntimeContext& ctx, Tensor dy, int64_t cols, int64_t layer);

}  // namespace parallax::executor
