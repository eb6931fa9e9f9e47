#include "planner/sim/trace_recorder.h"

#include <cmath>

#include "planner/cost/placement.h"

namespace parallax::planner {

namespace {

traces::TraceMetadata Metadata(const Plan& plan) {
  traces::TraceMetadata md;
  md.kind = "predicted";
  md.tool_version = "parallax 0.1.0";
  md.plan = LayoutToJson(plan.layout);
  md.model = plan.model.name;
  md.cluster = plan.cluster.name;
  md.world_size = plan.layout.world_size();
  return md;
}

}  // namespace

TraceRecorder::TraceRecorder(const Plan& plan, const SimOptions& options) : tracer_("predicted"), step_(options.step) {
  tracer_.trace().metadata = Metadata(plan);
  const Layout& l = plan.layout;
  ranks_.resize(static_cast<size_t>(l.pp));
  for (int64_t p = 0; p < l.pp; ++p) {
    if (!options.all_ranks) {
      ranks_[static_cast<size_t>(p)].push_back(GlobalRank(l, 0, 0, 0, p));
      continue;
    }
    for (int64_t d = 0; d < l.dp; ++d) {
      for (int64_t c = 0; c < l.cp; ++c) {
        for (int64_t t = 0; t < l.tp; ++t) ranks_[static_cast<size_t>(p)].push_back(GlobalRank(l, t, c, d, p));
      }
    }
  }
}

void TraceRecorder::Record(int64_t pp_rank, traces::Stream stream, OpKind op, Phase phase, int64_t microbatch,
                           int64_t stage, int64_t layer, double start_s, double dur_s, double flops, double bytes) {
  const int64_t start_ns = std::llround(start_s * 1e9);
  const int64_t end_ns = std::llround((start_s + dur_s) * 1e9);
  for (int64_t rank : ranks_[static_cast<size_t>(pp_rank)]) {
    traces::SliceSpec s;
    s.track = stream == traces::Stream::kPpComm ? PipelineLinkTrack(rank, op, phase) : tracer_.Track(rank, stream);
    s.name = tracer_.OpName(op);
    s.start_ns = start_ns;
    s.dur_ns = std::max<int64_t>(end_ns - start_ns, 0);
    s.identity = OpIdentity{step_, rank, microbatch, stage, layer, op, phase};
    s.flops = flops;
    s.bytes = bytes >= 0 ? static_cast<int64_t>(bytes) : -1;
    tracer_.Record(s);
  }
}

traces::TrackId TraceRecorder::PipelineLinkTrack(int64_t rank, OpKind op, Phase phase) {
  // Receives, forward sends and backward sends run on three independent FIFO links in the simulator;
  // each gets its own track so slices nest per track (Chrome trace rule). tids after the streams'.
  constexpr int64_t kFirstLinkTid = 16;
  if (op == OpKind::kPpRecv) return tracer_.CustomTrack(rank, kFirstLinkTid, "pp-recv", rank, traces::Stream::kPpComm);
  if (phase == Phase::kBwd) {
    return tracer_.CustomTrack(rank, kFirstLinkTid + 2, "pp-send-bwd", rank, traces::Stream::kPpComm);
  }
  return tracer_.CustomTrack(rank, kFirstLinkTid + 1, "pp-send-fwd", rank, traces::Stream::kPpComm);
}

}  // namespace parallax::planner
