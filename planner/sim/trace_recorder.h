#pragma once
// Turns simulated ops into a predicted traces::Trace: one track per (rank, stream), slices in
// integer ns with the DESIGN.md op identity, replicated onto every TP/DP rank when asked.

#include <cstdint>
#include <vector>

#include "model/op_identity.h"
#include "model/plan.h"
#include "planner/sim/simulator.h"
#include "traces/tracer.h"

namespace parallax::planner {

class TraceRecorder {
 public:
  TraceRecorder(const Plan& plan, const SimOptions& options);

  //! One op of pipeline rank `pp_rank`, times in seconds.
  void Record(int64_t pp_rank, traces::Stream stream, OpKind op, Phase phase, int64_t microbatch, int64_t stage,
              int64_t layer, double start_s, double dur_s, double flops, double bytes);

  traces::Trace Take() { return tracer_.Take(); }

 private:
  traces::Tracer tracer_;
  int64_t step_ = 0;
  traces::TrackId PipelineLinkTrack(int64_t rank, OpKind op, Phase phase);
  std::vector<std::vector<int64_t>> ranks_;  //!< global ranks that show pipeline rank i's timeline
};

}  // namespace parallax::planner
