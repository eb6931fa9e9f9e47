#pragma once
// Runs one training step's forward and backward passes in the order model/schedule.h gives this
// pipeline rank (GPipe, 1F1B, interleaved 1F1B) — the order the planner's simulator predicts.
// Activations and their gradients travel between stages on the pp stream as NCCL-style grouped
// send/recv: an op's outgoing tensor is held back and issued in one group with the receive the
// next op needs (Megatron's send_forward_recv_backward / send_backward_recv_forward pairing), so
// unbuffered sends cannot deadlock; the compute stream waits only for the data it needs. Tags name
// (micro-batch, stage, direction).

#include "executor/runtime/context.h"
#include "executor/runtime/data.h"
#include "executor/runtime/sharded_model.h"

namespace parallax::executor {

//! Runs every forward/backward of `step` on this rank, starting gradient synchronisation as the
//! groups finish. The last stage adds its micro-batches' summed per-token cross-entropy to
//! ctx.loss_sum.
Status RunPipelineStep(RuntimeContext& ctx, ShardedModel& model, const DataSource& data, int64_t step);

//! MPI tag of a message to model stage `stage` for micro-batch `microbatch`.
int PipelineTag(int64_t microbatch, int64_t stages, int64_t stage, bool backward);

}  // namespace parallax::executor
