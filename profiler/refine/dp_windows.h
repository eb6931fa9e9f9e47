#pragma once
// The DP-communication windows of a measured trace where collectives progress only when the host
// thread polls them (the CPU backend): a DP slice then lasts until the next op boundary, and what
// it cost the rank is read from its window (sample_fit.h WindowedCollectiveTime).

#include <vector>

#include "model/plan.h"
#include "profiler/refine/sample_fit.h"
#include "traces/diff.h"
#include "traces/trace.h"

namespace parallax::profiler {

//! Whether the measured run's collectives advanced only when its host thread polled them (the CPU
//! backend): as the trace says, else as its device implies (only the CPU backend runs a plan whose
//! device is not a GPU: `--backend cuda` refuses such a cluster).
bool CollectivesPolled(const traces::Trace& measured, const Plan& plan);

//! Fills the window fields of the DP-communication instances (`instances[i]` is the measured slice
//! of `al.pairs[i]`): the part of each slice's window no compute op of its rank covers, and the
//! compute inside it at its alone pace: each compute op's median over its instances that no DP
//! slice overlaps (pooled as FitSamples pools them, ComputeGroupKey), its own length where it has none.
void MeasureDpWindows(const traces::Trace& measured, const traces::Alignment& al, std::vector<OpInstance>& instances);

}  // namespace parallax::profiler
