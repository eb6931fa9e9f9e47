#pragma once
// The trace data model (DESIGN.md "Units and identities"): tracks (rank x stream), slices with
// integer-ns start/duration and an optional OpIdentity, flows, counters and metadata.
//
// Compact by construction: a slice is 56 bytes with its identity inline; names and categories
// are interned (4-byte ids); numeric args live in a side table only for slices that have them.
// Storage is chunked (ChunkedVector) so appending never copies what is already recorded.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/json_io.h"
#include "model/op_identity.h"
#include "traces/chunked_vector.h"
#include "traces/string_table.h"

namespace parallax::traces {

//! What a track runs. The first five are the rank streams of a parallax trace; kComm is
//! communication of unknown parallel dimension (imported NCCL streams), kOther a free-form track;
//! kCpComm (after them, so the earlier values keep their numbers) is a rank's context-parallel
//! stream, kEpComm its expert-parallel (MoE all-to-all) stream.
enum class Stream : uint8_t { kCompute, kTpComm, kDpComm, kPpComm, kHost, kComm, kOther, kCpComm, kEpComm };

//! "compute", "tp-comm", "dp-comm", "pp-comm", "host", "comm", "other", "cp-comm", "ep-comm"
const char* ToString(Stream s);
std::optional<Stream> StreamFromString(std::string_view s);
bool IsCommStream(Stream s);

using TrackId = uint32_t;

//! One timeline row: Chrome pid/tid plus what it means for training.
struct Track {
  int64_t pid = 0;          //!< Chrome pid: the rank in parallax traces; a process/device id in imports
  int64_t tid = 0;          //!< Chrome tid: the stream in parallax traces; thread / CUDA stream in imports
  int64_t rank = -1;        //!< training rank; -1 when unknown
  Stream stream = Stream::kOther;
  bool device = false;      //!< accelerator stream (GPU); false for host threads
  std::string name;         //!< thread_name
  std::string process_name; //!< process_name
  int64_t sort_index = 0;   //!< thread_sort_index (streams of a rank sort in Stream order)
};

//! OpIdentity squeezed into 18 bytes for storage inside a Slice.
struct PackedIdentity {
  int32_t step = 0;
  int32_t rank = 0;
  int32_t microbatch = -1;
  int16_t stage = -1;
  int16_t layer = -1;
  uint8_t op = 0;
  uint8_t phase = 0;

  //! False when a field is out of the packed range (step/rank/microbatch int32, stage/layer int16).
  static bool Fits(const OpIdentity& id);
  static PackedIdentity Pack(const OpIdentity& id);  //!< requires Fits(id)
  OpIdentity Unpack() const;
};

//! Bits of Slice::flags.
namespace slice_flags {
inline constexpr uint8_t kHasIdentity = 1;  //!< Slice::identity is valid
inline constexpr uint8_t kInstant = 2;      //!< an instant event (i/I), dur_ns == 0
inline constexpr uint8_t kCompute = 4;      //!< device compute (GEMM, attention, elementwise kernel)
inline constexpr uint8_t kComm = 8;         //!< communication (collective, send/recv, NCCL kernel)
inline constexpr uint8_t kMemory = 16;      //!< device memcpy/memset
inline constexpr uint8_t kAsync = 32;       //!< came from an async b/e pair
}  // namespace slice_flags

inline constexpr uint32_t kNoArgs = UINT32_MAX;

//! One timed interval on one track.
struct Slice {
  int64_t start_ns = 0;
  int64_t dur_ns = 0;  //!< >= 0
  TrackId track = 0;
  StringId name = kEmptyString;
  StringId category = kEmptyString;
  uint32_t args = kNoArgs;  //!< index into Trace's SliceArgs table, or kNoArgs
  PackedIdentity identity;  //!< valid when flags has kHasIdentity
  uint8_t flags = 0;

  int64_t end_ns() const { return start_ns + dur_ns; }
  bool has(uint8_t flag) const { return (flags & flag) != 0; }
};
static_assert(sizeof(Slice) <= 56, "Slice must stay compact: 10M slices well under 2 GB");

//! Numeric args of a slice; a field at its default is absent (not written).
struct SliceArgs {
  double flops = -1;              //!< floating-point operations, -1: absent
  int64_t bytes = -1;             //!< message or memory bytes, -1: absent
  int32_t group_size = 0;         //!< collective group size, 0: absent
  StringId collective = kEmptyString;  //!< "allreduce", "allgather", ... (NCCL imports)

  //! Args of a compute op.
  static SliceArgs Compute(double flops) {
    SliceArgs a;
    a.flops = flops;
    return a;
  }
  //! Args of a collective or send/recv.
  static SliceArgs Comm(int64_t bytes, int32_t group_size, StringId collective = kEmptyString) {
    SliceArgs a;
    a.bytes = bytes;
    a.group_size = group_size;
    a.collective = collective;
    return a;
  }
  bool empty() const { return flops < 0 && bytes < 0 && group_size <= 0 && collective == kEmptyString; }
};

//! An arrow between two points: send -> recv, launch -> kernel. Chrome binds each end to the
//! slice enclosing (track, time).
struct Flow {
  uint64_t id = 0;
  TrackId from_track = 0;
  TrackId to_track = 0;
  int64_t from_ns = 0;
  int64_t to_ns = 0;
  StringId name = kEmptyString;
  StringId category = kEmptyString;
};

//! One value of a counter series at a time (Chrome "C": name + args {series: value}).
struct CounterSample {
  TrackId track = 0;  //!< the counter belongs to this track's process (pid)
  StringId name = kEmptyString;
  StringId series = kEmptyString;
  int64_t ts_ns = 0;
  double value = 0;
};

//! What produced a trace. Written to the Chrome JSON's "otherData".
struct TraceMetadata {
  std::string kind;          //!< "predicted" (simulator), "measured" (executor), "imported" (Kineto)
  std::string tool_version;  //!< e.g. "parallax 0.1.0", or the Kineto schema version
  std::string source;        //!< file it was read from, if any
  Json plan;                 //!< plan name or object (null: absent)
  Json model;                //!< model name or object
  Json cluster;              //!< cluster name or object
  int64_t rank = -1;         //!< Kineto distributedInfo.rank of a single-rank import
  int64_t world_size = -1;   //!< Kineto distributedInfo.world_size
  //! Measured traces: how the run's collectives progressed. "host": only while the rank's host
  //! thread polled them between ops (the CPU backend's MPI), so a slice ends at the poll that saw
  //! it done; "device": beside compute (NCCL kernels). Empty: not recorded.
  std::string comm_progress;
};

class Trace {
 public:
  Trace();
  Trace(Trace&&) noexcept = default;
  Trace& operator=(Trace&&) noexcept = default;
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  TraceMetadata metadata;

  // Strings.
  StringId Intern(std::string_view s) { return strings_.Intern(s); }
  std::string_view Str(StringId id) const { return strings_.View(id); }
  const StringTable& strings() const { return strings_; }

  // Tracks; a (pid, tid) pair names at most one track.
  TrackId AddTrack(Track t);  //!< replaces nothing: the caller checks FindTrack first
  std::optional<TrackId> FindTrack(int64_t pid, int64_t tid) const;
  const Track& track(TrackId id) const { return tracks_[id]; }
  Track& track(TrackId id) { return tracks_[id]; }
  const std::vector<Track>& tracks() const { return tracks_; }

  // Slices.
  size_t AddSlice(const Slice& s) { return slices_.push_back(s); }
  uint32_t AddArgs(const SliceArgs& a) { return static_cast<uint32_t>(args_.push_back(a)); }
  const ChunkedVector<Slice>& slices() const { return slices_; }
  Slice& slice(size_t i) { return slices_[i]; }
  const Slice& slice(size_t i) const { return slices_[i]; }
  //! The slice's args, or nullptr.
  const SliceArgs* args(const Slice& s) const { return s.args == kNoArgs ? nullptr : &args_[s.args]; }
  std::optional<OpIdentity> identity(const Slice& s) const;
  void ReserveSlices(size_t n) { slices_.reserve(n); }

  // Flows and counters.
  void AddFlow(const Flow& f) { flows_.push_back(f); }
  const ChunkedVector<Flow>& flows() const { return flows_; }
  void AddCounter(const CounterSample& c) { counters_.push_back(c); }
  const ChunkedVector<CounterSample>& counters() const { return counters_; }

  //! Earliest slice start / latest slice end in ns (0 when there are no slices).
  int64_t first_ns() const;
  int64_t last_ns() const;
  //! Bytes held by this trace (capacity of all tables).
  size_t MemoryBytes() const;

  //! Appends `other` (e.g. another rank's trace): tracks are matched by (pid, tid).
  void Merge(const Trace& other);

 private:
  StringTable strings_;
  std::vector<Track> tracks_;
  std::unordered_map<uint64_t, std::vector<TrackId>> track_index_;  // hash(pid, tid) -> ids
  ChunkedVector<Slice> slices_;
  ChunkedVector<SliceArgs> args_;
  ChunkedVector<Flow> flows_;
  ChunkedVector<CounterSample> counters_;
};

//! Finds the first pair of partially overlapping slices on one track (X events must nest).
//! Returns a message naming the track and both slices, or nullopt when every track nests.
std::optional<std::string> CheckNesting(const Trace& trace);

}  // namespace parallax::traces
