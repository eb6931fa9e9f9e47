#include "planner/estimate/step_estimate.h"

#include <algorithm>
#include <vector>

#include "planner/estimate/step_phases.h"
#include "planner/estimate/sync_modes.h"

namespace parallax::planner {
namespace {

//! Where pipeline rank 0's step goes (Breakdown), from the phases' results.
Breakdown StepBreakdown(const Plan& plan, const PlanCosts& pc, const RankWork& w0, const PipelineTime& pt,
                        double pipe_s, double gather_delay_s, double step_s) {
  const double m = static_cast<double>(pc.microbatches);
  const RankCost& r0 = pc.ranks[0];
  Breakdown b;
  b.tp_comm_s = m * (r0.fwd_tp_s + r0.bwd_tp_s) + r0.sp_grad_last_s + r0.sp_grad_coalesced_s;
  b.compute_s = m * (r0.fwd_s + r0.bwd_s - r0.fwd_tp_s - r0.bwd_tp_s + w0.contention_s) + r0.grad_norm_s +
                r0.optimizer_s;
  b.dp_comm_s = step_s - pipe_s - r0.grad_norm_s - r0.optimizer_s + m * w0.dp_wait_s + gather_delay_s;
  b.pp_comm_s = plan.layout.pp > 1 ? pt.comm_fill_s + pt.steady_comm_s : 0;
  b.bubble_s = std::max(0.0, step_s - b.compute_s - b.tp_comm_s - b.dp_comm_s - b.pp_comm_s);
  return b;
}

}  // namespace

StepTime EstimateStepTime(const Plan& plan, const PlanCosts& pc) {
  const std::vector<RankWork> work = RankWorkOf(plan, pc);
  const PipelineTime pt = PipelineMakespan(plan, pc, work);
  double pipe = pt.pipe_s;
  // The step starts with the gradient zero-fill; the first stage's delays the whole pipeline.
  pipe += pc.ranks[0].grad_zero_step_s;
  const double gather_delay = OverlappedGatherDelay(plan, pc, work);
  pipe += gather_delay;
  // Sequence parallelism per parameter under ZeRO 0/1: each rank's last backward waits for its
  // gradient all-reduces, and the cool-down passes that delay down to rank 0.
  for (const RankCost& rc : pc.ranks) pipe += rc.sp_grad_last_s;
  const double step = StepEnd(pc, DpTailEnd(plan, pc, work, pipe));
  return {step, StepBreakdown(plan, pc, work[0], pt, pipe, gather_delay, step)};
}

Result<Prediction> Estimate(const Plan& plan, const CostDb* db) {
  PX_TRY(ValidateLayout(plan.layout, plan.model, plan.cluster));
  CostContext ctx(plan.cluster, plan.training.precision, db, &plan.implementation);
  const PlanCosts pc = CostPlan(ctx, plan);
  const StepTime st = WithSyncMode(plan, pc, EstimateStepTime(plan, pc), db);
  return FinishPrediction(plan, st.step_time_s, st.breakdown);
}

}  // namespace parallax::planner
