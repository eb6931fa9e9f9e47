#pragma once
// Discrete-event simulation of one training step (DESIGN.md "two evaluators"). Every pipeline
// rank runs PipelineOrder (model/schedule.h, the executor's order) on its compute stream, op by
// op from the costed unit lists (planner/cost/layer_ops.h); TP collectives sit on the critical
// path; pipeline sends go through a FIFO link per direction, each at its stage boundary's cost
// (intra- or inter-node, PlanCosts::boundary_p2p_s); DP collectives run on a DP stream
// (buckets per layer, ZeRO-3 prefetch one layer ahead) and slow overlapped compute by the
// contention factor; a grad-norm all-reduce joins all ranks before the optimizer.
// All TP and DP ranks of a pipeline stage behave alike: one representative per pipeline rank is
// simulated; the trace can replicate it onto every global rank.

#include <cstdint>
#include <optional>

#include "model/cost_db.h"
#include "model/plan.h"
#include "planner/estimate/prediction.h"
#include "traces/trace.h"

namespace parallax::planner {

struct SimOptions {
  bool record_trace = false;
  //! Trace every global rank (tp x cp x dp copies of each pipeline rank's timeline); otherwise only
  //! rank GlobalRank(0, 0, 0, pp_rank) of each pipeline rank.
  bool all_ranks = false;
  int64_t step = 0;  //!< OpIdentity::step of the recorded slices
};

struct SimResult {
  Prediction prediction;
  int64_t events = 0;  //!< ops simulated (compute, comm and transfers), all pipeline ranks
  std::optional<traces::Trace> trace;
};

//! Simulates `plan` (validated with ValidateLayout first; an invalid plan is a BadInput error).
Result<SimResult> Simulate(const Plan& plan, const CostDb* db = nullptr, const SimOptions& options = {});

}  // namespace parallax::planner
