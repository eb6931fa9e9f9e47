#pragma once
// Data-parallel gradient synchronisation, one parameter group per bucket.
// Every DP collective is enqueued on the dp stream after the backward compute that produced it and
// overlaps the backward passes that follow; the compute stream waits only before the optimizer.
// ZeRO 0/1: when a group's last backward of the step finishes, its fp32 gradients (or a bf16/fp16
// copy, when ctx.grad_reduce asks for it) start an all-reduce (ZeRO-0) or an in-place
// reduce-scatter (ZeRO-1, Megatron's distributed optimizer), after which only this rank's shard
// of the buffer holds the summed gradient. ZeRO 2/3: after every backward pass of a group its
// transient full gradient is reduce-scattered asynchronously and folded into this rank's shard at
// the group's next flush or before the optimizer.
// Gradients are sums (the loss is already scaled by 1/(global_batch*seq)), not means.

#include <vector>

#include "executor/runtime/context.h"
#include "executor/runtime/param_group.h"

namespace parallax::executor {

//! Sums the sequence-parallel partial gradients (norm weights, post-reduce biases, positions)
//! over TP, in `full_grads` laid out like the group's flat buffer. No-op without SP.
Status ReduceSequenceParallelGrads(RuntimeContext& ctx, ParamGroup& g, const Tensor& full_grads);
//! ZeRO 2/3, after a backward pass touched the group.
Status FlushMicrobatchGrads(RuntimeContext& ctx, ParamGroup& g);
//! ZeRO 0/1, after the group's last backward pass of the step.
Status StartGradSync(RuntimeContext& ctx, ParamGroup& g);
//! Waits for the pending all-reduces / reduce-scatters, then sums the tied word embedding's gradient between the
//! first and last pipeline stage (`tied_words` null when there is no such pair on this rank).
Status FinishGradSync(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, ParamGroup* tied_words);

}  // namespace parallax::executor
