#pragma once
// EventBuilder: turns parsed Chrome trace events into a Trace (internal to the reader).
// Knows the semantics of each phase; the scanner knows only JSON.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traces/json_scanner.h"
#include "traces/read_stats.h"
#include "traces/trace.h"

namespace parallax::traces {

//! A semantic error in one event (the reader adds the event index and byte offset).
struct EventError {
  std::string what;
};

//! What a slice's args say: its op identity and numeric args.
struct SliceFields {
  bool has_identity = false;
  PackedIdentity identity;
  bool has_args = false;
  SliceArgs args;  //!< args.collective is set by the builder (it interns)
};

//! The args keys that carry a slice's identity and numeric args (EventBuilder::DecodeArgs).
enum class ArgKey : uint8_t {
  kOther, kStep, kRank, kMb, kStage, kLayer, kOp, kPhase, kFlops, kBytes,
  kGroupSize,    //!< "group_size" (ours) or "Group size" (Kineto)
  kCollective,   //!< "collective" (ours) or "Collective name" (Kineto)
  kDtype, kInNelems, kOutNelems,  //!< Kineto's NCCL message size
};
//! The ArgKey of an args key (kOther for any other key).
ArgKey ArgKeyOf(std::string_view key);

struct RawArg {
  std::string_view key;
  RawValue value;
  //! ArgKeyOf(key) when the scanner recognised the key as written plainly; else kOther, and
  //! readers look at `key`.
  ArgKey known = ArgKey::kOther;
};

//! One event's fields as scanned; views point into the reader's buffer.
struct RawEvent {
  RawValue ph, name, cat, pid, tid, ts, dur, id, bp, scope;
  bool has_args = false;
  //! Top-level args, stored by the scanner's caller: `args_begin`/`args_count` index its arg
  //! store while scanning; `args` views them once bound (BindArgs). Nested values are
  //! kObject/kArray without text.
  uint32_t args_begin = 0, args_count = 0;
  std::span<const RawArg> args;

  //! Filled by EventBuilder::Predecode on a scanning thread, so that Add, on the one thread
  //! that builds the trace, only does what needs the trace. Add falls back to decoding itself
  //! where these are not set (and raises any error there, in file order).
  bool ts_ok = false, dur_ok = false;  //!< ts_ns / dur_ns hold valid ts / dur
  bool fields_ok = false;              //!< fields, bad_identity, collective* hold the decoded args
  bool bad_identity = false;
  uint8_t collective_keys = 0;         //!< string "collective"/"Collective name" args seen
  int64_t ts_ns = 0, dur_ns = 0;
  SliceFields fields;
  std::string_view collective;         //!< the last of them

  void Clear() {
    ph = name = cat = pid = tid = ts = dur = id = bp = scope = RawValue{};
    has_args = false;
    args_begin = args_count = 0;
    args = {};
    ts_ok = dur_ok = fields_ok = false;
  }
  void BindArgs(const std::vector<RawArg>& store) { args = {store.data() + args_begin, args_count}; }
  const RawValue* Arg(std::string_view key) const {
    for (const RawArg& a : args) {
      if (a.key == key) return &a.value;
    }
    return nullptr;
  }
};

class EventBuilder {
 public:
  EventBuilder(Trace& trace, ReadStats& stats);

  //! Adds one event; throws EventError for bad input.
  void Add(const RawEvent& ev);
  //! Decodes what of `ev` needs no trace state (times, args); any thread. Args must be bound.
  static void Predecode(RawEvent& ev);
  //! Whether Add reads `ev.args` after Predecode: metadata and counters, several collectives.
  static bool NeedsArgs(const RawEvent& ev);
  //! A top-level key of the JSON object other than traceEvents.
  void TopLevel(std::string_view key, const Json& value);
  //! Applies process/thread metadata, pairs what is left, classifies tracks, records warnings.
  void Finish();

 private:
  using IdFields = SliceFields;
  struct OpenSlice {
    int64_t start_ns;
    StringId name;
    StringId category;
    IdFields fields;
  };
  struct FlowEnd {
    TrackId track;
    int64_t ts_ns;
    StringId name;
  };

  int64_t ProcessId(const RawValue& v, const char* what);
  TrackId TrackFor(const RawEvent& ev);
  int64_t Ns(const RawValue& v, const char* what, bool required);
  IdFields ParseArgs(const RawEvent& ev);
  //! The args' fields without the collective (interned by ParseArgs). Thread-safe.
  static void DecodeArgs(const RawEvent& ev, SliceFields* f, bool* bad_identity,
                         std::string_view* collective, uint8_t* collective_keys);
  void AddSlice(TrackId track, int64_t start, int64_t dur, StringId name, StringId cat,
                const IdFields& f, uint8_t extra_flags);
  void Metadata(const RawEvent& ev);
  void FlowEvent(const RawEvent& ev, char ph);
  void Counter(const RawEvent& ev);
  void Async(const RawEvent& ev, char ph);
  void Warn(std::string w);
  //! Intern with a small direct-mapped cache in front of the string table: event names and
  //! categories repeat, and hashing them for every event was a tenth of a load.
  StringId InternCached(std::string_view s);

  Trace& trace_;
  ReadStats& stats_;
  std::unordered_map<std::string, int64_t> string_ids_;  // string pid/tid -> synthetic id
  int64_t last_pid_ = INT64_MIN, last_tid_ = INT64_MIN;
  TrackId last_track_ = 0;
  std::unordered_map<TrackId, std::vector<OpenSlice>> open_;                  // B/E stacks
  std::map<std::tuple<int64_t, StringId, uint64_t>, std::vector<OpenSlice>> async_;  // b/e
  std::unordered_map<uint64_t, FlowEnd> flow_starts_, flow_ends_;  // key: hash(cat, id)
  std::unordered_map<uint64_t, uint64_t> flow_ids_;
  // M metadata, applied in Finish (it may come before or after the events it names).
  std::map<int64_t, std::string> process_names_, process_labels_;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names_;
  std::map<std::pair<int64_t, int64_t>, int64_t> thread_sort_;
  std::vector<int64_t> category_counts_;  // by StringId
  struct CacheEntry {
    std::string_view text;  // views the trace's string table (stable)
    StringId id = kEmptyString;
  };
  static constexpr size_t kCacheSize = 256;
  CacheEntry cache_[kCacheSize];
  int64_t phase_counts_[128] = {};
  int64_t unmatched_end_ = 0, unclosed_begin_ = 0, bad_identity_ = 0, dup_flow_ = 0;
  std::vector<StringId> op_name_ids_;
};

}  // namespace parallax::traces
