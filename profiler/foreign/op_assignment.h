#pragma once
// Attributed units (attribution.h) -> the plan's op identities: a measured trace `refine` fits
// exactly as it fits our executor's. The plan's predicted op list for the traced rank gives the
// order: each unit goes to the first op at or just after the current one whose kind is among its
// rule's candidates and whose phase is the unit's (a layer norm is attn_norm, mlp_norm or
// final_norm by where it falls); glue (ops no rule names: views, residual adds, autograd
// bookkeeping) is time of the current op. Works alike for units that carry shapes and modules
// (Kineto) and for the array form's bare aten names. The order is checked against durations: each
// op's measured work over its predicted time, against the median of that ratio over the instances
// of the same op kind and phase (every layer and step).
//
// Profiler overhead (host units only): every recorded host event costs overhead_per_event_s
// (attribution.h, measured on the trace); an op's work loses that per event nested in its units,
// and the timeline before each op loses it per event recorded earlier, so gaps shrink by the
// bookkeeping of the top-level events too. Device kernels are timed on the device and keep
// their length.

#include <cstdint>
#include <string>
#include <vector>

#include "model/json_io.h"
#include "profiler/foreign/attribution.h"
#include "traces/trace.h"

namespace parallax::profiler {

//! Ratios of an op's measured work to its prediction further than this from its kind and phase's
//! median ratio (either way) are out of line; more than kMaxOutOfLineShare of the ops out of line means the
//! trace does not follow the plan's op order (another model or code).
inline constexpr double kOutOfLineRatio = 5.0;
inline constexpr double kMaxOutOfLineShare = 0.1;
//! Less of the units' time than this given to plan ops: the trace is of another model or code.
inline constexpr double kMinExplainedShare = 0.8;
//! Fewer of the plan's compute ops a step than this given time: another model (a ResNet's GEMMs
//! and norms land on a few of a GPT's ops and explain most of their own time). A framework that
//! fuses ops the plan keeps apart (Transformer Engine's norm into the next GEMM) still gives
//! time to three quarters of them.
inline constexpr double kMinOpCoverage = 0.5;
//! How far past the current op a unit may look for its op.
inline constexpr size_t kAssignLookahead = 4;

struct FamilyTime {
  std::string family;
  double time_s = 0;        //!< the family's units
  double attributed_s = 0;  //!< of which given to a plan op
  int64_t units = 0;
};

struct UnattributedTime {
  std::string name;  //!< kernel or host op name
  double time_s = 0;
  int64_t count = 0;
  double share_of_step = 0;
};

struct ForeignReport {
  std::string implementation;
  std::string form;  //!< "kineto" or "array" (the legacy autograd profiler's)
  std::string units; //!< "device kernels" or "host ops"
  int64_t rank = 0;
  int64_t steps = 1;        //!< profiled steps (the plan's op list run through again starts one)
  //! Per step (the means over the profiled steps): the span of the units as recorded, the unit time
  //! given to plan ops (glue included), glue, and below each family's and name's time.
  double step_s = 0;
  double attributed_s = 0;
  double glue_s = 0;
  int64_t unit_count = 0, assigned = 0, ops_matched = 0, ops_out_of_line = 0;
  int64_t plan_ops = 0;                       //!< the plan's compute ops a step on the traced rank
  std::vector<FamilyTime> families;           //!< by time, largest first
  std::vector<UnattributedTime> unattributed; //!< by time, largest first
  double overhead_per_event_s = 0;
  int64_t overhead_pairs = 0, recorded_events = 0;
  double overhead_removed_s = 0;  //!< from a step's span
  std::string attention;          //!< what the trace ran for attention ("flash", "unfused", "")
};

struct AssignedTrace {
  traces::Trace measured;  //!< parallax layout, slices with the plan's identities
  //! `measured` plus the framework's units on tracks of their own, each named by its kernel or op
  //! and categorised by the plan op it went to ("qkv fwd", "glue of qkv fwd", "unattributed"):
  //! what `refine --attributed-trace` writes for `trace diff` and the GUI.
  traces::Trace attributed;
  ForeignReport report;
};

//! `predicted`: the plan simulated (all ranks); `rank`: the traced rank. A trace of a rank the plan
//! does not have, with no unit that lands on a plan op, with fewer than kMinOpCoverage of the
//! plan's ops given time, with less than kMinExplainedShare of its units' time on plan ops, or
//! whose ops are out of line too often, is bad input naming `file`.
Result<AssignedTrace> AssignToPlan(const KinetoEvents& ev, const Attribution& a, const traces::Trace& predicted,
                                   int64_t rank, const std::string& file);

Json ForeignReportToJson(const ForeignReport& r);
std::string FormatForeignReport(const ForeignReport& r);

}  // namespace parallax::profiler
