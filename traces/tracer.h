#pragma once
// Tracer: the recording interface for trace producers (planner simulator, executor, CUPTI).
//
//   traces::Tracer tracer("predicted");                                   // or "measured"
//   tracer.metadata().plan = plan_json;                                   // optional
//   const TrackId compute = tracer.Track(/*rank=*/3, Stream::kCompute);   // once per rank x stream
//   const TrackId tp = tracer.Track(3, Stream::kTpComm);
//   tracer.Record(compute, tracer.OpName(OpKind::kQkv), t0_ns, dur_ns, id,
//                 SliceArgs::Compute(2.0 * m * n * k));
//   tracer.Record(tp, tracer.OpName(OpKind::kTpAllReduce), t1_ns, d_ns, id2,
//                 SliceArgs::Comm(bytes, /*group_size=*/4));
//   Status st = traces::WriteChromeTrace(tracer.trace(), "predicted.json.gz");
//
// Cheap on the hot path: Record() copies one 56-byte slice (+24 bytes of args when given) into
// chunked storage and allocates only once per 65,536 slices (never after Reserve()). Names are
// interned up front (Intern, OpName). Not thread-safe: use one Tracer per thread or rank and
// Trace::Merge the results.

#include <cstdint>
#include <optional>
#include <string_view>

#include "model/op_identity.h"
#include "traces/trace.h"

namespace parallax::traces {

//! One slice with every optional field (fill by assignment; the Record overloads cover the
//! common cases). Unset numeric args (-1 / 0) are not stored.
struct SliceSpec {
  TrackId track = 0;
  StringId name = kEmptyString;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;  //!< must be >= 0
  std::optional<OpIdentity> identity;
  StringId category = kEmptyString;  //!< empty: the track's stream name ("compute", "tp-comm", ...)
  double flops = -1;
  int64_t bytes = -1;
  int32_t group_size = 0;
  StringId collective = kEmptyString;
};

class Tracer {
 public:
  //! `kind`: "predicted" (simulator) or "measured" (executor); goes to metadata().kind.
  explicit Tracer(std::string_view kind = {});
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  //! Preallocates storage for `slices` slices so Record() never allocates.
  void Reserve(size_t slices);

  //! The track of `stream` on `rank`: pid = rank, tid = stream index, named "rank R" / stream name.
  //! Created on first use; cheap lookup afterwards (cache the id on hot paths anyway).
  TrackId Track(int64_t rank, Stream stream);
  //! A free-form track, e.g. one host thread of an import. Returns the existing one for (pid, tid).
  TrackId CustomTrack(int64_t pid, int64_t tid, std::string_view name, int64_t rank = -1,
                      Stream stream = Stream::kOther);

  StringId Intern(std::string_view s) { return trace_.Intern(s); }
  //! The interned name of an op kind ("qkv", "tp_all_reduce", ... as ToString(OpKind)).
  StringId OpName(OpKind k) const { return op_names_[static_cast<size_t>(k)]; }

  TraceMetadata& metadata() { return trace_.metadata; }

  //! Records one slice; returns its index in trace().slices(). Identities out of the packed
  //! range (PackedIdentity::Fits) and negative durations are programmer errors (assert).
  //! The category is the track's stream name ("compute", "tp-comm", ...).
  size_t Record(TrackId track, StringId name, int64_t start_ns, int64_t dur_ns);
  size_t Record(TrackId track, StringId name, int64_t start_ns, int64_t dur_ns, const OpIdentity& id,
                const SliceArgs& args = SliceArgs());
  size_t Record(const SliceSpec& s);
  //! Records a flow arrow (send -> recv, launch -> kernel) between two points in time.
  void Flow(TrackId from, int64_t from_ns, TrackId to, int64_t to_ns, StringId name,
            uint64_t id = 0);
  //! Records one counter sample (e.g. name "memory", series "allocated_bytes").
  void Counter(TrackId track, StringId name, StringId series, int64_t ts_ns, double value);

  const Trace& trace() const { return trace_; }
  Trace& trace() { return trace_; }
  //! Hands the recorded trace over; the Tracer is empty afterwards.
  Trace Take();

 private:
  void InitNames();
  size_t Append(TrackId track, StringId name, int64_t start_ns, int64_t dur_ns, const OpIdentity* id,
                const SliceArgs* args, StringId category);

  Trace trace_;
  static constexpr size_t kMaxOpKinds = 64;
  StringId op_names_[kMaxOpKinds] = {};
  //! Every Stream value (the last is kEpComm).
  static constexpr size_t kCachedStreams = static_cast<size_t>(Stream::kEpComm) + 1;
  StringId stream_names_[kCachedStreams] = {};
  uint64_t next_flow_id_ = 1;
  // Track(rank, stream) cache for small ranks: index rank * kCachedStreams + stream.
  std::vector<TrackId> rank_stream_cache_;
};

}  // namespace parallax::traces
