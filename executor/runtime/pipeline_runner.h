#pragma once
// Runs one training step's forward and backward passes in the order model/schedule.h gives this
// pipeline rank (GPipe, 1F1B, interleaved 1F1B) — the order the planner's simulator predicts.
// Activations and their gradients travel between stages with non-blocking sends (owned copies)
// and blocking receives issued when an op needs the data; tags name (micro-batch, stage,
// direction), so no schedule can deadlock on message order.

#include "executor/runtime/context.h"
#include "executor/runtime/data.h"
#include "executor/runtime/sharded_model.h"

namespace parallax::executor {

//! Runs every forward/backward of `step` on this rank, starting gradient synchronisation as the
//! groups finish. Returns the summed per-token cross-entropy of this rank's last-stage
//! micro-batches (0 on other stages).
Result<double> RunPipelineStep(RuntimeContext& ctx, ShardedModel& model, const DataSource& data, int64_t step);

//! MPI tag of a message to model stage `stage` for micro-batch `microbatch`.
int PipelineTag(int64_t microbatch, int64_t stages, int64_t stage, bool backward);

}  // namespace parallax::executor
