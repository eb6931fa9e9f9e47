#pragma once
// `parallax refine --implementation I --trace T` on a PyTorch profiler trace of framework I: the
// trace's events are attributed to op families and catalogue ops (attribution.h, one rule table
// per implementation), laid onto the plan's op identities in the plan's op order
// (op_assignment.h), the profiler's overhead removed, and the result refined exactly as a trace of
// our executor (refine.h): samples at the planner's shapes, op gap, run factors.
// The attention kernel is what the trace ran (flash when a flash / SDPA kernel or op is seen,
// unfused when only matmul + softmax are), overriding the profile's.

#include <string>

#include "profiler/foreign/op_assignment.h"
#include "profiler/refine/refine.h"

namespace parallax::profiler {

struct ForeignRefineResult {
  RefineResult refine;
  ForeignReport attribution;
  traces::Trace attributed;  //!< AssignedTrace::attributed
};

//! `plan.implementation` names the attribution table (AttributionTableFor).
Result<ForeignRefineResult> RefineForeign(const Plan& plan, const std::string& trace_file, const CostDb& db);

//! Refine's JSON with "attribution" (ForeignReportToJson) added.
Json ForeignRefineToJson(const ForeignRefineResult& r);
std::string FormatForeignRefine(const ForeignRefineResult& r);

}  // namespace parallax::profiler
