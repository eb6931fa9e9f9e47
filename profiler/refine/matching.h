#pragma once
// Matching a measured trace to the plan `refine` fits it against: the trace must be of this plan
// (its recorded layout and model, the work of its compute ops, enough aligned op identities), and
// each aligned pair of slices becomes an op instance to sample.

#include <string>
#include <vector>

#include "model/plan.h"
#include "model/result.h"
#include "profiler/refine/sample_fit.h"
#include "traces/diff.h"
#include "traces/trace.h"

namespace parallax::profiler {

//! Checks what the measured trace says it ran against the plan; adopts its training precision.
Status MatchRecordedPlan(const traces::Trace& measured, const std::string& file, Plan& plan);

//! Predicted and measured slices aligned by op identity (traces/diff.h). A trace without
//! identities, one whose measured ops match the plan's identities less than half the time, or whose
//! compute ops carry other work than the plan's, is bad input: it is of another plan.
Result<traces::Alignment> AlignWithPlan(const traces::Trace& predicted, const traces::Trace& measured,
                                        const std::string& file, const Plan& plan);

//! One instance per aligned pair, in `al.pairs` order: the predicted identity and bytes, the
//! measured length, and for a compute op whether a DP-communication slice of its rank overlaps it.
std::vector<OpInstance> MatchedInstances(const traces::Trace& predicted, const traces::Trace& measured,
                                         const traces::Alignment& al);

}  // namespace parallax::profiler
