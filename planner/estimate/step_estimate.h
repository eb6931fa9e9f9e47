#pragma once
// Closed-form step time (the search's evaluator). Same unit costs as the simulator
// (planner/cost/plan_costs.h); the pipeline, DP overlap and ZeRO-3 prefetch are expressed as
// formulas instead of events. tests/planner/closed_form_vs_sim_test.cpp holds it within 3% of
// the simulation.
//
// Pipeline makespan with per-rank work W_r = F_r + B_r per micro-batch, chunk work w = W / v and
// p2p time c (Narayanan et al. SC'21 section 2.2, generalised to unequal stages):
//   GPipe:        sum F + sum B + (m-1)(max F + max B) + 2(p-1)c
//   1F1B:         sum W + (m-1) max(W + 2c) + 2(p-1)c
//   interleaved:  m max W + (sum W - max W) / v + 2(p-1)c

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
