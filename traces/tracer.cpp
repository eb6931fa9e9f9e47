#include "traces/tracer.h"

#include <cassert>
#include <string>

namespace parallax::traces {

Tracer::Tracer(std::string_view kind) {
  trace_.metadata.kind = std::string(kind);
  InitNames();
}

void Tracer::InitNames() {
  for (size_t k = 0; k < kMaxOpKinds; ++k) {
    const char* name = ToString(static_cast<OpKind>(k));
    if (name == nullptr || !OpKindFromString(name) ||
        static_cast<size_t>(*OpKindFromString(name)) != k) {
      break;
    }
    op_names_[k] = trace_.Intern(name);
  }
  for (size_t s = 0; s < kCachedStreams; ++s) {
    stream_names_[s] = trace_.Intern(ToString(static_cast<Stream>(s)));
  }
}

void Tracer::Reserve(size_t slices) { trace_.ReserveSlices(slices); }

TrackId Tracer::Track(int64_t rank, Stream stream) {
  const auto s = static_cast<size_t>(stream);
  constexpr size_t kMaxCachedRank = 1 << 16;
  const bool cacheable = rank >= 0 && static_cast<size_t>(rank) < kMaxCachedRank;
  const size_t slot = cacheable ? static_cast<size_t>(rank) * kCachedStreams + s : 0;
  if (cacheable && slot < rank_stream_cache_.size() && rank_stream_cache_[slot] != UINT32_MAX) {
    return rank_stream_cache_[slot];
  }
  const auto tid = static_cast<int64_t>(s);
  TrackId id;
  if (auto found = trace_.FindTrack(rank, tid)) {
    id = *found;
  } else {
    traces::Track t;
    t.pid = rank;
    t.tid = tid;
    t.rank = rank;
    t.stream = stream;
    t.device = stream != Stream::kHost;
    t.name = ToString(stream);
    t.process_name = "rank " + std::to_string(rank);
    t.sort_index = tid;
    id = trace_.AddTrack(std::move(t));
  }
  if (cacheable) {
    if (slot >= rank_stream_cache_.size()) rank_stream_cache_.resize(slot + kCachedStreams, UINT32_MAX);
    rank_stream_cache_[slot] = id;
  }
  return id;
}

TrackId Tracer::CustomTrack(int64_t pid, int64_t tid, std::string_view name, int64_t rank,
                            Stream stream) {
  if (auto found = trace_.FindTrack(pid, tid)) return *found;
  traces::Track t;
  t.pid = pid;
  t.tid = tid;
  t.rank = rank;
  t.stream = stream;
  t.device = stream != Stream::kHost && stream != Stream::kOther;
  t.name = std::string(name);
  t.process_name = rank >= 0 ? "rank " + std::to_string(rank) : "process " + std::to_string(pid);
  t.sort_index = tid;
  return trace_.AddTrack(std::move(t));
}

size_t Tracer::Record(TrackId track, StringId name, int64_t start_ns, int64_t dur_ns) {
  return Append(track, name, start_ns, dur_ns, nullptr, nullptr, kEmptyString);
}

size_t Tracer::Record(TrackId track, StringId name, int64_t start_ns, int64_t dur_ns,
                      const OpIdentity& id, const SliceArgs& args) {
  return Append(track, name, start_ns, dur_ns, &id, args.empty() ? nullptr : &args, kEmptyString);
}

size_t Tracer::Record(const SliceSpec& s) {
  const SliceArgs args{s.flops, s.bytes, s.group_size, s.collective};
  return Append(s.track, s.name, s.start_ns, s.dur_ns, s.identity ? &*s.identity : nullptr,
                args.empty() ? nullptr : &args, s.category);
}

size_t Tracer::Append(TrackId track_id, StringId name, int64_t start_ns, int64_t dur_ns,
                      const OpIdentity* id, const SliceArgs* args, StringId category) {
  assert(dur_ns >= 0);
  assert(track_id < trace_.tracks().size());
  const traces::Track& track = trace_.track(track_id);
  Slice slice;
  slice.start_ns = start_ns;
  slice.dur_ns = dur_ns;
  slice.track = track_id;
  slice.name = name;
  slice.category = category != kEmptyString ? category : stream_names_[static_cast<size_t>(track.stream)];
  bool comm = IsCommStream(track.stream);
  if (id != nullptr) {
    assert(PackedIdentity::Fits(*id));
    slice.identity = PackedIdentity::Pack(*id);
    slice.flags |= slice_flags::kHasIdentity;
    comm = comm || IsCommunication(id->op);
  }
  if (comm) {
    slice.flags |= slice_flags::kComm;
  } else if (track.stream == Stream::kCompute) {
    slice.flags |= slice_flags::kCompute;
  }
  if (args != nullptr) slice.args = trace_.AddArgs(*args);
  return trace_.AddSlice(slice);
}

void Tracer::Flow(TrackId from, int64_t from_ns, TrackId to, int64_t to_ns, StringId name,
                  uint64_t id) {
  traces::Flow f;
  f.id = id != 0 ? id : next_flow_id_++;
  f.from_track = from;
  f.to_track = to;
  f.from_ns = from_ns;
  f.to_ns = to_ns;
  f.name = name;
  f.category = name;
  trace_.AddFlow(f);
}

void Tracer::Counter(TrackId track, StringId name, StringId series, int64_t ts_ns, double value) {
  trace_.AddCounter(CounterSample{track, name, series, ts_ns, value});
}

Trace Tracer::Take() {
  Trace out = std::move(trace_);
  trace_ = Trace();
  trace_.metadata = out.metadata;
  rank_stream_cache_.clear();
  InitNames();
  return out;
}

}  // namespace parallax::traces
