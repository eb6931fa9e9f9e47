#pragma once
// The closed form's phases (formulas in step_estimate.h), in the order EstimateStepTime runs them:
//   rank work     one micro-batch per pipeline rank, DP waits and blocking sends folded in
//                 (rank_work.cpp; the ZeRO-3 gather waits in param_gather_wait.cpp);
//   pipeline      fill/drain and the steady period of the schedule (pipeline_phases.cpp);
//   gather wait   ZeRO-1/2 overlapped parameter gather under the first forwards (param_gather_wait.cpp);
//   DP tail       gradient collectives exposed after each rank's last backward, then the grad-norm
//                 sync, the optimizer step and the after-step gather (dp_tail.cpp).
// Internal to planner/estimate; the unit costs come from planner/cost/plan_costs.h.

#include <cstdint>
#include <vector>

#include "model/plan.h"
#include "planner/cost/plan_costs.h"

namespace parallax::planner {

//! One micro-batch of pipeline rank r through all its chunks (F_r, B_r of step_estimate.h), with
//! its ZeRO-2/3 DP waits, ZeRO-2 contention and blocking sends folded in.
struct RankWork {
  double fwd_s = 0, bwd_s = 0;
  //! The ZeRO-3 part of fwd_s / bwd_s that only follows an earlier pass on the same rank (a first
  //! gather queued behind that pass's last reduce-scatter): absent from the first pass of the fill.
  double fwd_queue_s = 0, bwd_queue_s = 0;
  double dp_wait_s = 0;     //!< ZeRO-2/3 waits for the DP stream (gathers, reduce-scatters)
  double contention_s = 0;  //!< ZeRO-2 backward slowdown beside its reduce-scatters
};

//! Per-group buckets (our executor): the outer groups of a chunk, as the simulator walks them.
struct OuterGroups {
  double embedding_gathers = 0;  //!< ZeRO-3 gathers before the embedding's pass
  double head_gathers = 0;       //!< before the head's
  double chain = 0;              //!< gradient collectives but the last: the compute waits for each
  double last = 0;               //!< the last one, left in flight
  bool any = false;
};
//! Chunk `cc`'s outer groups under per-group buckets (all zero otherwise).
OuterGroups OuterOf(const DpCost& dp, const ChunkCost& cc);

//! Rank work of every pipeline rank (index = pp_rank).
std::vector<RankWork> RankWorkOf(const Plan& plan, const PlanCosts& pc);
//! ZeRO-3: adds rank `rc`'s per-micro-batch gather and reduce-scatter waits to `work`.
void AddZero3Waits(const Plan& plan, const PlanCosts& pc, const RankCost& rc, RankWork& work);

//! p2p time of hop r (pipeline rank r -> (r + 1) % pp); 0 when pp == 1.
double Hop(const PlanCosts& pc, int64_t r);

//! The pipeline from the first forward to the last backward, without the step's other phases.
struct PipelineTime {
  double pipe_s = 0;         //!< fill/drain plus the steady state
  double comm_fill_s = 0;    //!< p2p of the fill and drain (interleaved: the ring waits too)
  double steady_comm_s = 0;  //!< p2p the steady state does not hide, whole step
};
PipelineTime PipelineMakespan(const Plan& plan, const PlanCosts& pc, const std::vector<RankWork>& work);

//! ZeRO-1/2 with overlap_param_gather: how much later the pipeline ends because chunks' first
//! forwards wait for the previous step's parameter gather, or because the gather slows them.
double OverlappedGatherDelay(const Plan& plan, const PlanCosts& pc, const std::vector<RankWork>& work);

//! When the last rank's DP tail ends (never before `pipe_s`, the pipeline's end on rank 0).
double DpTailEnd(const Plan& plan, const PlanCosts& pc, const std::vector<RankWork>& work, double pipe_s);
//! The step's end: the slowest rank's grad-norm sync, optimizer step and non-overlapped parameter
//! gather after `tail_end_s`.
double StepEnd(const PlanCosts& pc, double tail_end_s);

}  // namespace parallax::planner
