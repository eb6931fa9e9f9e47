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

struct RefineResult {
  CostDb db;  //!< the refined database
  Plan plan;  //!< the plan as simulated (precision as the measured run trained)
  traces::TraceDiff before, after;
  std::vector<OpFamilyError> families;  //!< by measured time, largest first
  MergeCounts merged;
  int64_t instances_used = 0;
  std::map<std::string, int64_t> not_sampled;
  bool contention_refitted = false;  //!< the trace raised the contention factor (merged.contention_raised)
};

//! `trace_file` names the trace in messages. `db` must be for the plan's device.
Result<RefineResult> Refine(const Plan& plan, const traces::Trace& measured, const std::string& trace_file,
                            const CostDb& db);

//! `--json` shape: {step_time: {measured_s, predicted_before_s, predicted_after_s, error_before,
//! error_after}, families: [...], samples: {...}, not_sampled: {...}, contention: {...}}.
Json RefineToJson(const RefineResult& r);
std::string FormatRefine(const RefineResult& r);

}  // namespace parallax::profiler
