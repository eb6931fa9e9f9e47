#pragma once
// Predicted-vs-measured alignment and diff. Slices align one-to-one by op identity (the k-th
// slice of an identity in one trace with the k-th in the other, by start time); traces without
// identities (imports) fall back to name and order. The diff reports per op kind and phase the
// predicted and measured totals and relative error, the step-time error and the largest
// mismatches: what cost-model refinement and the GUI comparison build on.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/json_io.h"
#include "traces/trace.h"

namespace parallax::traces {

enum class AlignMode { kIdentity, kNameOrder };
const char* ToString(AlignMode m);

//! Slice indices (into trace.slices()) paired across two traces.
struct Alignment {
  AlignMode mode = AlignMode::kIdentity;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;  //!< (predicted index, measured index)
  int64_t only_predicted = 0;
  int64_t only_measured = 0;
  int64_t predicted_step = -1;  //!< identity mode: the predicted trace's step when it holds one, else -1
};

//! Which measured steps the predicted trace is compared with (identity mode).
struct StepSelection {
  //! -1: automatic. When the predicted trace holds one step (what `simulate` writes) and the
  //! measured one several, that predicted step is compared with every measured step but the
  //! first (the warm-up step: allocation, communicator setup, cold caches); with one measured
  //! step, with that one. When both hold several steps, equal step numbers pair.
  //! >= 0: the predicted step (its only one, or the equal-numbered one) against this measured step.
  int64_t measured_step = -1;
};

//! Pairs the slices of two traces (instants are ignored; in identity mode so are slices without
//! an identity). Identity mode when both traces carry identities, else name and order.
Alignment AlignSlices(const Trace& predicted, const Trace& measured, const StepSelection& steps = {});

//! Step numbers of the slices with identities, ascending.
std::vector<int64_t> StepsOf(const Trace& t);

struct OpDiff {
  std::string op;      //!< op kind ("qkv"), or the slice name in name-order mode
  std::string phase;   //!< "fwd", "bwd", ...; empty in name-order mode
  int64_t matched = 0;
  int64_t predicted_ns = 0;  //!< sum over matched slices
  int64_t measured_ns = 0;
  double rel_error = 0;      //!< (predicted - measured) / measured; 0 when measured is 0
};

struct Mismatch {
  std::string what;  //!< identity ("step=0 rank=1 mb=2 stage=0 layer=3 qkv fwd") or "name #k"
  int64_t predicted_ns = 0;
  int64_t measured_ns = 0;
  double rel_error = 0;
};

struct TraceDiff {
  AlignMode mode = AlignMode::kIdentity;
  int64_t matched = 0, only_predicted = 0, only_measured = 0;
  std::vector<OpDiff> per_op;  //!< sorted by measured time, largest first
  int64_t steps = 0;           //!< steps compared (identity mode); 1 in name-order mode
  std::vector<int64_t> measured_steps;  //!< the measured step numbers compared (identity mode)
  int64_t predicted_step = -1;          //!< the predicted step when one is compared with several
  int64_t predicted_step_ns = 0;  //!< median over the compared steps of the slowest rank's step span (identity), or the whole device span (name-order)
  int64_t measured_step_ns = 0;
  double step_time_error = 0;     //!< (predicted - measured) / measured
  std::vector<Mismatch> largest;  //!< by |predicted - measured|
};

struct DiffOptions {
  size_t top = 10;
  StepSelection steps;
};

TraceDiff DiffTraces(const Trace& predicted, const Trace& measured, const DiffOptions& options = {});
//! Keys: alignment, matched, only_predicted, only_measured, per_op ([{op, phase, matched,
//! predicted_ns, measured_ns, rel_error}]), step_time ({steps, measured_steps, predicted_ns, measured_ns,
//! rel_error}), largest_mismatches ([{what, predicted_ns, measured_ns, rel_error}]).
Json DiffToJson(const TraceDiff& diff);
std::string FormatDiff(const TraceDiff& diff);

}  // namespace parallax::traces
