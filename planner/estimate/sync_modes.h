#pragma once
// Prices the classic modes (model/sync_mode.h) and the cluster's stragglers and failures on top of
// the all-reduce family's step estimate of the same layout:
//   - per worker iteration: the layout's compute (its step without the exposed DP time), times the
//     worker's straggler factor (model/reliability.h) and a lognormal jitter draw;
//   - the exchange each mode adds: the all-reduce (exposed as the estimate has it), or compression's
//     host kernels (model/compression_kernels.h, from their calibrated CostDb families) plus its
//     host-plane exchanges (bf16, int8 and top-k all-gathers; PowerSGD's two small all-reduces per
//     matrix and the dense one of the vectors), or the parameter servers' push and
//     pull (each server's link carries W/S of every worker's gradient and weights: incast), or the
//     backup coordinator's gather and broadcast, or local SGD's weight all-reduce every H steps;
//   - and the waits: a synchronous step waits for the slowest worker, backup workers for the
//     (W-B)-th fastest (order statistic), SSP while the fastest is S iterations ahead, async never;
//     a small seeded event simulation of the workers gives the expectations and, for async and SSP,
//     the staleness distribution of the applied gradients;
//   - on CPU nodes whose workers outnumber their CPUs (ClusterSpec::cpus_per_node), how the
//     workers share them: a synchronous iteration spreads them evenly over the CPUs and runs each
//     CPU's in turn, an injected straggler's lag leaves its CPU to the others, and an async/SSP
//     iteration runs at the share of its CPU when it starts (docs/classic_modes.md).
// Failures: goodput with the Young/Daly checkpoint interval tau = sqrt(2 delta M) - delta
// (Daly 2006, eq. 20, first order), M the job's MTBF and delta the checkpoint write time.

#include <vector>

#include "model/cost_db.h"
#include "model/plan.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"

namespace parallax::planner {

struct ModeEstimate {
  double step_time_s = 0;            //!< seconds per global batch (W worker iterations)
  double allreduce_step_time_s = 0;  //!< the same layout synchronous, with the same stragglers
  double compute_s = 0;              //!< one worker iteration's compute, no straggler
  double exchange_s = 0;             //!< the mode's communication and compression per iteration
  double wait_s = 0;                 //!< mean wait for other workers per iteration
  double tokens_per_s = 0;
  //! Async/SSP: fraction of applied gradients at each staleness (index = updates in between).
  std::vector<double> staleness;
  double mean_staleness = 0;
};

//! The mode's estimate from the all-reduce estimate `allreduce` of the same layout.
ModeEstimate EstimateSyncMode(const Plan& plan, const PlanCosts& pc, const StepTime& allreduce,
                              const CostDb* db = nullptr);
//! The step time the search ranks by: unchanged for the all-reduce family without stragglers.
StepTime WithSyncMode(const Plan& plan, const PlanCosts& pc, const StepTime& allreduce, const CostDb* db = nullptr);
Json ModeEstimateToJson(const ModeEstimate& e);

struct Goodput {
  double job_mtbf_s = 0;
  double checkpoint_write_s = 0;
  double checkpoint_restore_s = 0;
  double interval_s = 0;   //!< Young/Daly: the checkpoint interval that maximises goodput
  double goodput = 1;      //!< fraction of wall time that advances training
  double effective_tokens_per_s = 0;
};
//! Goodput of a job stepping in `step_time_s` on the plan's cluster with its failure rate (the
//! checkpoint write time, when the cluster gives none, is the weights and Adam state per GPU at
//! 2 GB/s to storage).
Goodput EstimateGoodput(const Plan& plan, double step_time_s, double tokens_per_step);
Json GoodputToJson(const Goodput& g);

}  // namespace parallax::planner
