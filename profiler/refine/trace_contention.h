#pragma once
// `refine`'s contention from a measured trace: how much of its gradient reductions the compute
// beside them did not hide, as the planner's contention factor.

#include <optional>

#include "traces/diff.h"
#include "traces/trace.h"

namespace parallax::profiler {

//! The end-to-end contention a measured trace shows (calibrate's quantity, in the planner's model:
//! compute beside a DP collective of isolated length t_m runs k times slower over it, costing
//! t_m (1 - 1/k) more). Over every gradient reduction (all-reduce, reduce-scatter) with compute of
//! its rank before it and backward compute after it (the last buckets, which the grad-norm read and
//! the optimizer wait for, are exposed by that dependency), the time inside its measured window that
//! no compute op covers is what it cost beyond what the compute hid; t_m is its predicted (isolated) length. So
//! 1/k = 1 - sum(uncovered) / sum(t_m). A lower bound: compute inside the window counts at its
//! measured, slowed length. nullopt without such reductions.
std::optional<double> TraceContention(const traces::Trace& predicted, const traces::Trace& measured,
                                      const traces::Alignment& al);

}  // namespace parallax::profiler
