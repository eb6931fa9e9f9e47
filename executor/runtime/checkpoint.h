#pragma once
// Sharded checkpoints: every rank writes its own file with its parameters (its TP shard, and
// under ZeRO-3 its DP shard), its Adam moments, the step and the data position, atomically
// (temp file in the same folder, fsync, rename). Layout on disk:
//
//   <dir>/step_<k>/rank_<r>.bin   "PLXCKPT1\n", one JSON header line, then per group the raw
//                                 little-endian arrays params (compute dtype) | main (fp32 main
//                                 weights, mixed precision only) | adam_m | adam_v (fp32)
//   <dir>/latest                  "step_<k>\n", written by rank 0 after every rank has written
//
// A checkpoint resumes only under the layout that wrote it (the header records it).

#include <cstdint>
#include <string>
#include <vector>

#include "executor/runtime/context.h"
#include "executor/runtime/param_group.h"

namespace parallax::executor {

//! Collective: creates `dir` and proves it writable on every rank.
Status PrepareCheckpointDir(Communicator& world, const std::string& dir);
//! Collective: writes the checkpoint of the state after `step` completed steps.
Status SaveCheckpoint(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, const std::string& dir,
                      int64_t step);
//! Collective: loads the latest checkpoint in `dir` into `groups`; returns its step.
Result<int64_t> LoadCheckpoint(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups, const std::string& dir);

}  // namespace parallax::executor
