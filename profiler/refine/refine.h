#pragma once
// `parallax refine`: fit the cost database from a measured trace of a plan.
//   1. The plan is simulated with the input database (same op identities as the executor's).
//   2. Predicted and measured slices align by identity (traces/diff.h; matching.h checks that the
//      trace is of this plan).
//   3. Each matched op's measured time becomes samples at the planner's shapes for that op
//      (planner/cost/priced_ops.h, sample_fit.h); collective points (dp_windows.h where the host
//      polls collectives), the contention factor (trace_contention.h), the host gap between
//      ops (op_gap.h) and the launch floor (launch_floor.h; only lowered) are re-fitted. Never one
//      correction factor on the whole step.
//   4. The plan is simulated again with the refined database; the step-time and per-op-family
//      errors before and after are reported (report.cpp).
// A trace of another plan (its recorded layout or model differs, or too few identities match),
// or without identities, is bad input.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/cost_db.h"
#include "model/plan.h"
#include "profiler/refine/cost_db_merge.h"
#include "profiler/refine/launch_floor.h"
#include "profiler/refine/op_gap.h"
#include "traces/diff.h"
#include "traces/trace.h"

namespace parallax::profiler {

//! One op kind's predicted and measured totals over the matched slices (all phases).
struct OpFamilyError {
  std::string op;
  int64_t matched = 0;
  double measured_s = 0;
  double predicted_before_s = 0, predicted_after_s = 0;
  double error_before = 0, error_after = 0;  //!< (predicted - measured) / measured
};

//! A run whose op times averaged more than this over their medians was disturbed (another
//! process, throttling, a slower minute of a shared machine). Refine then refuses the two figures
//! a disturbance inflates most, and says so (`disturbed`, a warning line): the contention sample
//! (waits beside the gradient reductions, and overlapped over alone op times) and the op-time
//! charge (mean over median). The database keeps its own. Per-op medians are still sampled: a
//! median ignores a minority of slowed instances.
inline constexpr double kDisturbedRunRatio = 1.25;
inline bool RunDisturbed(const RunOpTimes& t) { return t.mean_over_median > kDisturbedRunRatio; }

//! What refine refused from a disturbed run.
struct DisturbedRefusal {
  bool refused = false;
  double trace_contention = 0;  //!< the contention sample it would have taken (0: none)
};

struct RefineResult {
  CostDb db;  //!< the refined database
  Plan plan;  //!< the plan as simulated (precision as the measured run trained)
  traces::TraceDiff before, after;
  std::vector<OpFamilyError> families;  //!< by measured time, largest first
  MergeCounts merged;
  int64_t instances_used = 0;
  std::map<std::string, int64_t> not_sampled;
  bool contention_refitted = false;  //!< the trace raised the contention factor (merged.contention_raised)
  //! The run's collectives advanced only when its host thread polled them: its DP slices were read
  //! as what they cost (WindowedCollectiveTime), not as their length.
  bool collectives_polled = false;
  //! This trace's op times over their medians (not measured: the database's earlier figure, if
  //! any, is kept and not reported as this run's; disturbed: reported, not applied)
  RunOpTimes run_op_times;
  //! The same in the run's median step (FittedSamples::median_step_over_medians): what the refined
  //! database charges unless the run was disturbed
  double median_step_op_times = 0;
  DisturbedRefusal disturbed;  //!< set when RunDisturbed(run_op_times)
  OpGap op_gap;  //!< this trace's host gap between ops (CostDb::op_gap_us when enough pairs)
  LaunchFloor launch;  //!< the per-kernel launch floor the trace bounds (CostDb::launch_overhead_us when lowered)
};

//! `trace_file` names the trace in messages. `db` must be for the plan's device.
Result<RefineResult> Refine(const Plan& plan, const traces::Trace& measured, const std::string& trace_file,
                            const CostDb& db);

//! `--json` shape: {step_time: {measured_s, predicted_before_s, predicted_after_s, error_before,
//! error_after}, families: [...], samples: {...}, not_sampled: {...}, contention: {...}, run_factors: {...},
//! run_op_times: {mean_over_median, median_step, instances} (when the trace measured it)}.
Json RefineToJson(const RefineResult& r);
std::string FormatRefine(const RefineResult& r);

}  // namespace parallax::profiler
