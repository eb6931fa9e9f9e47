#include "traces/trace.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace parallax::traces {
namespace {

constexpr const char* kStreamNames[] = {"compute", "tp-comm", "dp-comm", "pp-comm",
                                        "host",    "comm",    "other",   "cp-comm", "ep-comm"};

uint64_t TrackKey(int64_t pid, int64_t tid) {
  const auto a = static_cast<uint64_t>(pid);
  const auto b = static_cast<uint64_t>(tid);
  return a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
}

template <class T>
bool InRange(int64_t v) {
  return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
}

}  // namespace

const char* ToString(Stream s) { return kStreamNames[static_cast<size_t>(s)]; }

std::optional<Stream> StreamFromString(std::string_view s) {
  for (size_t i = 0; i < std::size(kStreamNames); ++i) {
    if (s == kStreamNames[i]) return static_cast<Stream>(i);
  }
  return std::nullopt;
}

bool IsCommStream(Stream s) {
  return s == Stream::kTpComm || s == Stream::kDpComm || s == Stream::kPpComm || s == Stream::kComm ||
         s == Stream::kCpComm || s == Stream::kEpComm;
}

bool PackedIdentity::Fits(const OpIdentity& id) {
  return InRange<int32_t>(id.step) && InRange<int32_t>(id.rank) && InRange<int32_t>(id.microbatch) &&
         InRange<int16_t>(id.stage) && InRange<int16_t>(id.layer);
}

PackedIdentity PackedIdentity::Pack(const OpIdentity& id) {
  assert(Fits(id));
  PackedIdentity p;
  p.step = static_cast<int32_t>(id.step);
  p.rank = static_cast<int32_t>(id.rank);
  p.microbatch = static_cast<int32_t>(id.microbatch);
  p.stage = static_cast<int16_t>(id.stage);
  p.layer = static_cast<int16_t>(id.layer);
  p.op = static_cast<uint8_t>(id.op);
  p.phase = static_cast<uint8_t>(id.phase);
  return p;
}

OpIdentity PackedIdentity::Unpack() const {
  OpIdentity id;
  id.step = step;
  id.rank = rank;
  id.microbatch = microbatch;
  id.stage = stage;
  id.layer = layer;
  id.op = static_cast<OpKind>(op);
  id.phase = static_cast<Phase>(phase);
  return id;
}

Trace::Trace() = default;

TrackId Trace::AddTrack(Track t) {
  const auto id = static_cast<TrackId>(tracks_.size());
  track_index_[TrackKey(t.pid, t.tid)].push_back(id);
  tracks_.push_back(std::move(t));
  return id;
}

std::optional<TrackId> Trace::FindTrack(int64_t pid, int64_t tid) const {
  auto it = track_index_.find(TrackKey(pid, tid));
  if (it == track_index_.end()) return std::nullopt;
  for (TrackId id : it->second) {
    if (tracks_[id].pid == pid && tracks_[id].tid == tid) return id;
  }
  return std::nullopt;
}

std::optional<OpIdentity> Trace::identity(const Slice& s) const {
  if (!s.has(slice_flags::kHasIdentity)) return std::nullopt;
  return s.identity.Unpack();
}

int64_t Trace::first_ns() const {
  if (slices_.empty()) return 0;
  int64_t v = std::numeric_limits<int64_t>::max();
  slices_.ForEach([&](const Slice& s) { v = std::min(v, s.start_ns); });
  return v;
}

int64_t Trace::last_ns() const {
  if (slices_.empty()) return 0;
  int64_t v = std::numeric_limits<int64_t>::min();
  slices_.ForEach([&](const Slice& s) { v = std::max(v, s.end_ns()); });
  return v;
}

size_t Trace::MemoryBytes() const {
  size_t bytes = sizeof(*this) + strings_.MemoryBytes();
  for (const auto& t : tracks_) bytes += sizeof(Track) + t.name.capacity() + t.process_name.capacity();
  bytes += track_index_.size() * (sizeof(uint64_t) + sizeof(std::vector<TrackId>) + 2 * sizeof(void*));
  bytes += slices_.capacity_bytes() + args_.capacity_bytes() + flows_.capacity_bytes() +
           counters_.capacity_bytes();
  return bytes;
}

void Trace::Merge(const Trace& other) {
  std::vector<TrackId> track_map(other.tracks_.size());
  for (size_t i = 0; i < other.tracks_.size(); ++i) {
    const Track& t = other.tracks_[i];
    auto found = FindTrack(t.pid, t.tid);
    track_map[i] = found ? *found : AddTrack(t);
  }
  std::vector<StringId> str_map(other.strings_.size());
  for (size_t i = 0; i < other.strings_.size(); ++i) {
    str_map[i] = Intern(other.strings_.View(static_cast<StringId>(i)));
  }
  other.slices_.ForEach([&](const Slice& s) {
    Slice c = s;
    c.track = track_map[s.track];
    c.name = str_map[s.name];
    c.category = str_map[s.category];
    if (const SliceArgs* a = other.args(s)) {
      SliceArgs ca = *a;
      ca.collective = str_map[a->collective];
      c.args = AddArgs(ca);
    }
    AddSlice(c);
  });
  other.flows_.ForEach([&](const Flow& f) {
    Flow c = f;
    c.from_track = track_map[f.from_track];
    c.to_track = track_map[f.to_track];
    c.name = str_map[f.name];
    c.category = str_map[f.category];
    AddFlow(c);
  });
  other.counters_.ForEach([&](const CounterSample& cs) {
    CounterSample c = cs;
    c.track = track_map[cs.track];
    c.name = str_map[cs.name];
    c.series = str_map[cs.series];
    AddCounter(c);
  });
}

std::optional<std::string> CheckNesting(const Trace& trace) {
  std::vector<std::vector<uint32_t>> per_track(trace.tracks().size());
  for (size_t i = 0; i < trace.slices().size(); ++i) {
    const Slice& s = trace.slice(i);
    if (!s.has(slice_flags::kInstant) && !s.has(slice_flags::kAsync)) {
      per_track[s.track].push_back(static_cast<uint32_t>(i));
    }
  }
  for (size_t t = 0; t < per_track.size(); ++t) {
    auto& idx = per_track[t];
    std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
      const Slice& x = trace.slice(a);
      const Slice& y = trace.slice(b);
      if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
      return x.dur_ns > y.dur_ns;
    });
    std::vector<uint32_t> open;
    for (uint32_t i : idx) {
      const Slice& s = trace.slice(i);
      while (!open.empty() && trace.slice(open.back()).end_ns() <= s.start_ns) open.pop_back();
      if (!open.empty() && trace.slice(open.back()).end_ns() < s.end_ns()) {
        const Slice& p = trace.slice(open.back());
        const Track& tr = trace.track(static_cast<TrackId>(t));
        return "track pid " + std::to_string(tr.pid) + " tid " + std::to_string(tr.tid) + ": slice '" +
               std::string(trace.Str(s.name)) + "' [" + std::to_string(s.start_ns) + ", " +
               std::to_string(s.end_ns()) + ") partially overlaps '" + std::string(trace.Str(p.name)) +
               "' [" + std::to_string(p.start_ns) + ", " + std::to_string(p.end_ns()) + ")";
      }
      open.push_back(i);
    }
  }
  return std::nullopt;
}

}  // namespace parallax::traces
