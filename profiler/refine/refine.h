#pragma once
// `parallax refine`: fit the cost database from a measured trace of a plan.
//   1. The plan is simulated with the input database (same op identities as the executor's).
//   2. Predicted and measured slices align by identity (traces/diff.h).
//   3. Each matched op's measured time becomes samples at the planner's shapes for that op
//      (profiler/refine/op_catalog.h, sample_fit.h); collective points and the contention factor
//      are re-fitted. Never one correction factor on the whole step.
//   4. The plan is simulated again with the refined database; the step-time and per-op-family
//      errors before and after are reported.
// A trace of another plan (its recorded layout or model differs, or too few identities match),
// or without identities, is bad input.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_db.h"
#include "model/plan.h"
#include "profiler/refine/cost_db_merge.h"
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
//! process, throttling, a slower minute of a shared machine): refine still charges the ratio to
//! every compute op it predicts, and says so (`run_op_times.disturbed`, a warning line).
inline constexpr double kDisturbedRunRatio = 1.25;
inline bool RunDisturbed(const RunOpTimes& t) { return t.mean_over_median > kDisturbedRunRatio; }

//! Fewer pairs than this leave the database's op gap as it was.
inline constexpr int64_t kMinOpGapPairs = 20;

//! The host time between consecutive compute ops of a measured trace.
struct OpGap {
  double mean_s = 0;   //!< mean gap, seconds
  int64_t pairs = 0;   //!< consecutive op pairs it is the mean of
  //! Enough pairs to replace the database's op gap (CostDb::op_gap_us).
  bool applied() const { return pairs >= kMinOpGapPairs; }
};

//! Per rank, each two consecutive compute ops of one micro-batch's forward, backward or
//! recompute with no other op of the rank between them (a wait for a collective or a receive is
//! no host gap), in the steps after the first when there are several: the mean time from the
//! first's end to the second's start. On our executor that is host work between two ops (the
//! recorder, the allocator, launches the previous op did not cover) while the device idles.
OpGap MeasureOpGap(const traces::Trace& measured);

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
  //! any, is kept and not reported as this run's)
  RunOpTimes run_op_times;
  OpGap op_gap;  //!< this trace's host gap between ops (CostDb::op_gap_us when enough pairs)
};

//! The end-to-end contention a measured trace shows (calibrate's quantity, in the planner's model:
//! compute beside a DP collective of isolated length t_m runs k times slower over it, costing
//! t_m (1 - 1/k) more). Over every gradient reduction (all-reduce, reduce-scatter) with compute of
//! its rank before it and backward compute after it (the last buckets, which the grad-norm read and
//! the optimizer wait for, are exposed by that dependency), the time inside its measured window that
//! no compute op covers
//! is what it cost beyond what the compute hid; t_m is its predicted (isolated) length. So
//! 1/k = 1 - sum(uncovered) / sum(t_m). A lower bound: compute inside the window counts at its
//! measured, slowed length. nullopt without such reductions.
std::optional<double> TraceContention(const traces::Trace& predicted, const traces::Trace& measured,
                                      const traces::Alignment& al);

//! `trace_file` names the trace in messages. `db` must be for the plan's device.
Result<RefineResult> Refine(const Plan& plan, const traces::Trace& measured, const std::string& trace_file,
                            const CostDb& db);

//! `--json` shape: {step_time: {measured_s, predicted_before_s, predicted_after_s, error_before,
//! error_after}, families: [...], samples: {...}, not_sampled: {...}, contention: {...}, run_factors: {...},
//! run_op_times: {mean_over_median, instances} (when the trace measured it)}.
Json RefineToJson(const RefineResult& r);
std::string FormatRefine(const RefineResult& r);

}  // namespace parallax::profiler
