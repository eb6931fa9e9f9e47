#pragma once
// Closed-form step time (the search's evaluator). Same unit costs as the simulator
// (planner/cost/plan_costs.h); the pipeline, DP overlap and ZeRO-3 prefetch are expressed as
// formulas instead of events. tests/planner/closed_form_vs_sim_test.cpp holds it within 3% of
// the simulation. The formula runs in named phases (step_phases.h): rank work, pipeline fill/drain
// and steady period, parameter-gather wait, DP tail.
//
// Pipeline makespan with per-rank work W_r = F_r + B_r per micro-batch, chunk work w = W / v and
// the p2p time c_r of hop r (pipeline rank r -> r+1; c_{p-1} the interleaved wrap p-1 -> 0),
// generalising Narayanan et al. SC'21 section 2.2 to unequal stages and boundaries:
//   GPipe:        sum F + sum B + (m-1)(max(max F, max c) + max(max B, max c)) + 2 sum_{r<p-1} c_r
//   1F1B:         sum W + (m-1) T + 2 sum_{r<p-1} c_r,  T = max(max W, max c, max_r (W_r + W_{r+1} + 2c_r) / 2)
//                 (interleaved with v = 1: / 3)
//   interleaved:  m v t + (sum W - max W) / v + 2 sum_{r<p-1} c_r + 2(v-1) sum_r c_r,
//                 t = max(max w, max c, max_r (w_r + w_{r+1} + 2c_r) / 3), r over all p hops

#include "model/cost_db.h"
#include "model/plan.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/prediction.h"

namespace parallax::planner {

//! Step time and breakdown of `plan` from its costs (no validation, no memory).
struct StepTime {
  double step_time_s = 0;
  Breakdown breakdown;
};
StepTime EstimateStepTime(const Plan& plan, const PlanCosts& costs);

//! Validates, costs and estimates one plan.
Result<Prediction> Estimate(const Plan& plan, const CostDb* db = nullptr);

}  // namespace parallax::planner
