#pragma once
// The host gap between ops that `refine` reads from a measured trace (CostDb::op_gap_us): the
// device idles while the host records, allocates and launches between two compute ops.

#include <cstdint>

#include "traces/trace.h"

namespace parallax::profiler {

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

}  // namespace parallax::profiler
