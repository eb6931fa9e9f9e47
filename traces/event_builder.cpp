#include "traces/event_builder.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "traces/chrome_writer.h"
#include "traces/kineto.h"

namespace parallax::traces {
namespace {

std::string Quote(std::string_view s) {
  std::string out = "'";
  out.append(s.substr(0, 64));
  if (s.size() > 64) out += "...";
  out += "'";
  return out;
}

template <class T>
bool FitsIn(int64_t v) {
  return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
}

uint64_t FlowKey(StringId cat, uint64_t id) { return id * 0x9E3779B97F4A7C15ULL + cat; }

//! Slot of a short-text cache: length and three characters (collisions only cost a miss).
size_t CacheSlot(std::string_view s, size_t slots) {
  if (s.empty()) return 0;
  const auto c = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned char>(s[i])); };
  return (s.size() * 31 + c(0) * 7 + c(s.size() - 1) * 13 + c(s.size() / 2)) & (slots - 1);
}

//! `k == lit` where the caller has checked that the sizes are equal: a compare of a constant
//! size, which the compiler turns into one or two loads instead of a call.
template <size_t N>
bool SameKey(std::string_view k, const char (&lit)[N]) {
  return std::memcmp(k.data(), lit, N - 1) == 0;
}

bool SameText(std::string_view a, std::string_view b) {
  // memcmp must not see the null data() of an empty view, even with size 0.
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

//! OpKindFromString / PhaseFromString behind a cache keyed by the canonical (static) name.
template <class E, size_t N>
std::optional<E> CachedEnum(std::string_view s, std::pair<std::string_view, E> (&cache)[N],
                            std::optional<E> (*lookup)(std::string_view)) {
  auto& e = cache[CacheSlot(s, N)];
  if (!e.first.empty() && SameText(e.first, s)) return e.second;
  const std::optional<E> v = lookup(s);
  if (v) e = {ToString(*v), *v};
  return v;
}

}  // namespace

ArgKey ArgKeyOf(std::string_view k) {
  switch (k.size()) {  // by length first, then one compare of a constant size
    case 2:
      if (SameKey(k, "op")) return ArgKey::kOp;
      if (SameKey(k, "mb")) return ArgKey::kMb;
      break;
    case 4:
      if (SameKey(k, "step")) return ArgKey::kStep;
      if (SameKey(k, "rank")) return ArgKey::kRank;
      break;
    case 5:
      if (SameKey(k, "phase")) return ArgKey::kPhase;
      if (SameKey(k, "stage")) return ArgKey::kStage;
      if (SameKey(k, "layer")) return ArgKey::kLayer;
      if (SameKey(k, "flops")) return ArgKey::kFlops;
      if (SameKey(k, "bytes")) return ArgKey::kBytes;
      if (SameKey(k, "dtype")) return ArgKey::kDtype;
      break;
    case 10:
      if (SameKey(k, "group_size") || SameKey(k, "Group size")) return ArgKey::kGroupSize;
      if (SameKey(k, "collective")) return ArgKey::kCollective;
      break;
    case 13:
      if (SameKey(k, "In msg nelems")) return ArgKey::kInNelems;
      break;
    case 14:
      if (SameKey(k, "Out msg nelems")) return ArgKey::kOutNelems;
      break;
    case 15:
      if (SameKey(k, "Collective name")) return ArgKey::kCollective;
      break;
    default:
      break;
  }
  return ArgKey::kOther;
}

StringId EventBuilder::InternCached(std::string_view s) {
  CacheEntry& e = cache_[CacheSlot(s, kCacheSize)];
  if (SameText(e.text, s)) return e.id;  // an empty entry matches only "" (id 0)
  const StringId id = trace_.Intern(s);
  e = CacheEntry{trace_.Str(id), id};
  return id;
}

namespace {

}  // namespace

EventBuilder::EventBuilder(Trace& trace, ReadStats& stats) : trace_(trace), stats_(stats) {}

void EventBuilder::Warn(std::string w) {
  constexpr size_t kMaxWarnings = 50;
  if (stats_.warnings.size() < kMaxWarnings) stats_.warnings.push_back(std::move(w));
}

int64_t EventBuilder::ProcessId(const RawValue& v, const char* what) {
  switch (v.type) {
    case ValueType::kNone: return 0;
    case ValueType::kNumber: {
      int64_t id;
      if (!ParseInt64(v, &id)) throw EventError{std::string(what) + " must be an integer, got " + Quote(v.text)};
      return id;
    }
    case ValueType::kString: {
      // Strings ("Spans", "") get stable negative ids so they never collide with numbers.
      auto [it, inserted] = string_ids_.try_emplace(std::string(v.text), 0);
      if (inserted) it->second = -1 - static_cast<int64_t>(string_ids_.size() - 1);
      return it->second;
    }
    default: throw EventError{std::string(what) + " must be a number or a string"};
  }
}

TrackId EventBuilder::TrackFor(const RawEvent& ev) {
  const int64_t pid = ProcessId(ev.pid, "pid");
  const int64_t tid = ProcessId(ev.tid, "tid");
  if (pid == last_pid_ && tid == last_tid_) return last_track_;
  TrackId id;
  if (auto found = trace_.FindTrack(pid, tid)) {
    id = *found;
  } else {
    Track t;
    t.pid = pid;
    t.tid = tid;
    t.sort_index = tid;
    id = trace_.AddTrack(std::move(t));
  }
  last_pid_ = pid;
  last_tid_ = tid;
  last_track_ = id;
  return id;
}

int64_t EventBuilder::Ns(const RawValue& v, const char* what, bool required) {
  if (!v.present()) {
    if (required) throw EventError{std::string("missing ") + what};
    return 0;
  }
  if (v.type != ValueType::kNumber) throw EventError{std::string(what) + " must be a number"};
  int64_t ns;
  // |t| <= 2^62 ns (146 years) keeps start + dur and end - start free of overflow.
  constexpr int64_t kLimit = int64_t{1} << 62;
  if (!ParseMicrosToNs(v, &ns) || ns > kLimit || ns < -kLimit) {
    throw EventError{std::string(what) + " out of range: " + Quote(v.text)};
  }
  return ns;
}

void EventBuilder::DecodeArgs(const RawEvent& ev, SliceFields* decoded, bool* bad_identity,
                              std::string_view* collective, uint8_t* collective_keys) {
  SliceFields& f = *decoded;
  *bad_identity = false;
  *collective_keys = 0;
  const RawValue* op = nullptr;
  const RawValue* phase = nullptr;
  const RawValue* ints[5] = {};  // step, rank, mb, stage, layer
  const RawValue* in_nelems = nullptr;
  const RawValue* out_nelems = nullptr;
  const RawValue* dtype = nullptr;
  for (const RawArg& a : ev.args) {
    const RawValue& v = a.value;
    switch (a.known != ArgKey::kOther ? a.known : ArgKeyOf(a.key)) {
      case ArgKey::kOther: break;
      case ArgKey::kStep: ints[0] = &v; break;
      case ArgKey::kRank: ints[1] = &v; break;
      case ArgKey::kMb: ints[2] = &v; break;
      case ArgKey::kStage: ints[3] = &v; break;
      case ArgKey::kLayer: ints[4] = &v; break;
      case ArgKey::kOp: op = &v; break;
      case ArgKey::kPhase: phase = &v; break;
      case ArgKey::kFlops:
        if (v.type == ValueType::kNumber) f.has_args = ParseDouble(v, &f.args.flops) || f.has_args;
        break;
      case ArgKey::kBytes:
        if (v.type == ValueType::kNumber) f.has_args = ParseInt64(v, &f.args.bytes) || f.has_args;
        break;
      case ArgKey::kGroupSize: {
        int64_t g;
        if (v.type == ValueType::kNumber && ParseInt64(v, &g) && g > 0 && g <= INT32_MAX) {
          f.args.group_size = static_cast<int32_t>(g);
          f.has_args = true;
        }
        break;
      }
      case ArgKey::kCollective:
        if (v.type == ValueType::kString) {
          *collective = v.text;
          if (*collective_keys < 2) ++*collective_keys;  // 2: several
          f.has_args = true;
        }
        break;
      case ArgKey::kDtype: dtype = &v; break;
      case ArgKey::kInNelems: in_nelems = &v; break;
      case ArgKey::kOutNelems: out_nelems = &v; break;
    }
  }
  if (op != nullptr && phase != nullptr) {
    std::optional<OpKind> kind;
    std::optional<Phase> ph;
    // Per-thread caches: DecodeArgs runs on the scanning threads.
    thread_local std::pair<std::string_view, OpKind> op_cache[64] = {};
    thread_local std::pair<std::string_view, Phase> phase_cache[16] = {};
    if (op->type == ValueType::kString) kind = CachedEnum(op->text, op_cache, &OpKindFromString);
    if (phase->type == ValueType::kString) ph = CachedEnum(phase->text, phase_cache, &PhaseFromString);
    OpIdentity id;
    id.microbatch = id.stage = id.layer = -1;
    int64_t* fields[5] = {&id.step, &id.rank, &id.microbatch, &id.stage, &id.layer};
    bool ok = kind.has_value() && ph.has_value();
    for (int i = 0; i < 5 && ok; ++i) {
      if (ints[i] == nullptr) continue;
      ok = ints[i]->type == ValueType::kNumber && ParseInt64(*ints[i], fields[i]);
    }
    if (ok) {
      id.op = *kind;
      id.phase = *ph;
      ok = PackedIdentity::Fits(id);
    }
    if (ok) {
      f.has_identity = true;
      f.identity = PackedIdentity::Pack(id);
    } else {
      *bad_identity = true;
    }
  }
  // NCCL message size (Kineto): elements x dtype size; the larger of in/out is the full buffer,
  // which is the size nccl-tests reports for every collective.
  if ((in_nelems != nullptr || out_nelems != nullptr) && dtype != nullptr && f.args.bytes < 0) {
    int64_t in = 0, out = 0;
    if (in_nelems != nullptr && in_nelems->type == ValueType::kNumber) ParseInt64(*in_nelems, &in);
    if (out_nelems != nullptr && out_nelems->type == ValueType::kNumber) ParseInt64(*out_nelems, &out);
    const int elem = dtype->type == ValueType::kString ? KinetoDtypeBytes(dtype->text) : 0;
    const int64_t n = std::max(in, out);
    if (elem > 0 && n > 0 && n <= INT64_MAX / elem) {
      f.args.bytes = n * elem;
      f.has_args = true;
    }
  }
}

EventBuilder::IdFields EventBuilder::ParseArgs(const RawEvent& ev) {
  IdFields f;
  if (!ev.has_args) return f;
  bool bad = false;
  std::string_view collective;
  uint8_t collective_keys = 0;
  if (ev.fields_ok) {
    f = ev.fields;
    bad = ev.bad_identity;
    collective = ev.collective;
    collective_keys = ev.collective_keys;
  } else {
    DecodeArgs(ev, &f, &bad, &collective, &collective_keys);
  }
  if (collective_keys == 1) {
    f.args.collective = InternCached(collective);
  } else if (collective_keys > 1) {  // each is interned, in order, as the last one wins
    for (const RawArg& a : ev.args) {
      if ((a.known == ArgKey::kCollective || ArgKeyOf(a.key) == ArgKey::kCollective) &&
          a.value.type == ValueType::kString) {
        f.args.collective = InternCached(a.value.text);
      }
    }
  }
  if (bad) ++bad_identity_;
  return f;
}

namespace {

bool TryNs(const RawValue& v, int64_t* ns) {
  constexpr int64_t kLimit = int64_t{1} << 62;  // as EventBuilder::Ns
  return v.type == ValueType::kNumber && ParseMicrosToNs(v, ns) && *ns <= kLimit && *ns >= -kLimit;
}

}  // namespace

void EventBuilder::Predecode(RawEvent& ev) {
  ev.ts_ok = TryNs(ev.ts, &ev.ts_ns);
  ev.dur_ok = TryNs(ev.dur, &ev.dur_ns);
  if (ev.has_args) {
    ev.fields = SliceFields{};
    DecodeArgs(ev, &ev.fields, &ev.bad_identity, &ev.collective, &ev.collective_keys);
    ev.fields_ok = true;
  }
}

bool EventBuilder::NeedsArgs(const RawEvent& ev) {
  if (!ev.fields_ok || ev.collective_keys > 1) return true;
  const std::string_view ph = ev.ph.text;
  return ev.ph.type != ValueType::kString || ph.size() != 1 || ph[0] == 'M' || ph[0] == 'C';
}

void EventBuilder::AddSlice(TrackId track, int64_t start, int64_t dur, StringId name, StringId cat,
                            const IdFields& f, uint8_t extra_flags) {
  Slice s;
  s.start_ns = start;
  s.dur_ns = dur;
  s.track = track;
  s.name = name;
  s.category = cat;
  const std::string_view cat_text = trace_.Str(cat);
  const std::string_view name_text = trace_.Str(name);
  s.flags = static_cast<uint8_t>(SliceFlagsFor(cat_text, name_text) | extra_flags);
  SliceArgs args = f.args;
  bool has_args = f.has_args;
  if (cat_text == "kernel" && IsNcclKernel(name_text)) {
    ++stats_.nccl_kernels;
    if (args.collective == kEmptyString) {
      const std::string_view coll = NcclCollectiveFromKernelName(name_text);
      if (!coll.empty()) {
        args.collective = trace_.Intern(coll);
        has_args = true;
      }
    }
  }
  if (f.has_identity) {
    s.identity = f.identity;
    s.flags |= slice_flags::kHasIdentity;
    if (IsCommunication(static_cast<OpKind>(f.identity.op))) {
      s.flags = static_cast<uint8_t>((s.flags & ~slice_flags::kCompute) | slice_flags::kComm);
    }
  }
  if (has_args) s.args = trace_.AddArgs(args);
  trace_.AddSlice(s);
}

void EventBuilder::Add(const RawEvent& ev) {
  ++stats_.events;
  if (!ev.ph.present()) throw EventError{"missing ph"};
  if (ev.ph.type != ValueType::kString || ev.ph.text.size() != 1) {
    throw EventError{"unknown phase " + Quote(ev.ph.text)};
  }
  const char ph = ev.ph.text[0];
  if (ev.cat.present() && ev.cat.type != ValueType::kString) throw EventError{"cat must be a string"};
  if (ev.name.present() && ev.name.type != ValueType::kString) throw EventError{"name must be a string"};
  const StringId cat = ev.cat.present() ? InternCached(ev.cat.text) : kEmptyString;
  switch (ph) {
    case 'X': case 'B': case 'E': case 'i': case 'I': case 'C': case 'M': case 's': case 't':
    case 'f': case 'b': case 'e': case 'n': case 'P': case 'O': case 'N': case 'D': case 'R':
    case 'c': case 'v': case 'V': case '(': case ')':
      break;
    default:
      throw EventError{"unknown phase " + Quote(ev.ph.text)};
  }
  ++phase_counts_[static_cast<unsigned char>(ph)];
  if (cat >= category_counts_.size()) category_counts_.resize(cat + 1);
  ++category_counts_[cat];

  if (ph == 'M') return Metadata(ev);
  const int64_t ts = ev.ts_ok ? ev.ts_ns : Ns(ev.ts, "ts", true);
  switch (ph) {
    case 'X': {
      const int64_t dur = ev.dur_ok ? ev.dur_ns : Ns(ev.dur, "dur", true);
      if (dur < 0) throw EventError{"negative duration (dur " + std::string(ev.dur.text) + ")"};
      const IdFields f = ParseArgs(ev);
      AddSlice(TrackFor(ev), ts, dur, InternCached(ev.name.text), cat, f, 0);
      return;
    }
    case 'B': {
      const TrackId track = TrackFor(ev);
      open_[track].push_back(OpenSlice{ts, trace_.Intern(ev.name.text), cat, ParseArgs(ev)});
      return;
    }
    case 'E': {
      const TrackId track = TrackFor(ev);
      auto& stack = open_[track];
      if (stack.empty()) {
        ++unmatched_end_;
        return;
      }
      const OpenSlice o = stack.back();
      stack.pop_back();
      if (ts < o.start_ns) throw EventError{"E before its B (negative duration)"};
      AddSlice(track, o.start_ns, ts - o.start_ns, o.name, o.category, o.fields, 0);
      return;
    }
    case 'i':
    case 'I':
      AddSlice(TrackFor(ev), ts, 0, trace_.Intern(ev.name.text), cat, ParseArgs(ev), slice_flags::kInstant);
      return;
    case 'C':
      return Counter(ev);
    case 's':
    case 'f':
    case 't':
      return FlowEvent(ev, ph);
    case 'b':
    case 'e':
      return Async(ev, ph);
    default:
      return;  // known Chrome phases without a place in the model: counted, skipped
  }
}

void EventBuilder::Metadata(const RawEvent& ev) {
  const std::string_view name = ev.name.text;
  const int64_t pid = ProcessId(ev.pid, "pid");
  const int64_t tid = ProcessId(ev.tid, "tid");
  auto str_arg = [&](std::string_view key) -> std::optional<std::string> {
    const RawValue* v = ev.Arg(key);
    if (v == nullptr || v->type != ValueType::kString) return std::nullopt;
    return std::string(v->text);
  };
  if (name == "process_name") {
    if (auto s = str_arg("name")) process_names_[pid] = *s;
  } else if (name == "process_labels") {
    if (auto s = str_arg("labels")) process_labels_[pid] = *s;
  } else if (name == "thread_name") {
    if (auto s = str_arg("name")) thread_names_[{pid, tid}] = *s;
  } else if (name == "thread_sort_index") {
    const RawValue* v = ev.Arg("sort_index");
    int64_t idx;
    if (v != nullptr && v->type == ValueType::kNumber && ParseInt64(*v, &idx)) {
      thread_sort_[{pid, tid}] = idx;
    }
  }
}

void EventBuilder::FlowEvent(const RawEvent& ev, char ph) {
  if (ph == 't') return;  // intermediate steps carry no slice of their own
  uint64_t id = 0;
  if (ev.id.type == ValueType::kNumber) {
    int64_t v;
    if (!ParseInt64(ev.id, &v)) throw EventError{"flow id must be an integer"};
    id = static_cast<uint64_t>(v);
  } else if (ev.id.type == ValueType::kString) {
    id = std::hash<std::string_view>{}(ev.id.text) | (uint64_t{1} << 63);
  } else {
    throw EventError{"flow event without id"};
  }
  const StringId cat = ev.cat.present() ? trace_.Intern(ev.cat.text) : kEmptyString;
  const uint64_t key = FlowKey(cat, id);
  const FlowEnd here{TrackFor(ev), Ns(ev.ts, "ts", true), trace_.Intern(ev.name.text)};
  auto& mine = ph == 's' ? flow_starts_ : flow_ends_;
  auto& other = ph == 's' ? flow_ends_ : flow_starts_;
  if (auto it = other.find(key); it != other.end()) {
    const FlowEnd& start = ph == 's' ? here : it->second;
    const FlowEnd& end = ph == 's' ? it->second : here;
    trace_.AddFlow(Flow{id, start.track, end.track, start.ts_ns, end.ts_ns, start.name, cat});
    other.erase(it);
    return;
  }
  auto [it, inserted] = mine.insert_or_assign(key, here);
  (void)it;
  if (!inserted) ++dup_flow_;
}

void EventBuilder::Counter(const RawEvent& ev) {
  const TrackId track = TrackFor(ev);
  const StringId name = trace_.Intern(ev.name.text);
  const int64_t ts = Ns(ev.ts, "ts", true);
  for (const RawArg& a : ev.args) {
    double v;
    if (a.value.type == ValueType::kNumber && ParseDouble(a.value, &v)) {
      trace_.AddCounter(CounterSample{track, name, trace_.Intern(a.key), ts, v});
    }
  }
}

void EventBuilder::Async(const RawEvent& ev, char ph) {
  const int64_t pid = ProcessId(ev.pid, "pid");
  const StringId cat = ev.cat.present() ? trace_.Intern(ev.cat.text) : kEmptyString;
  uint64_t id = 0;
  if (ev.id.type == ValueType::kNumber) {
    int64_t v;
    if (ParseInt64(ev.id, &v)) id = static_cast<uint64_t>(v);
  } else if (ev.id.type == ValueType::kString) {
    id = std::hash<std::string_view>{}(ev.id.text);
  }
  const int64_t ts = Ns(ev.ts, "ts", true);
  auto& stack = async_[{pid, cat, id}];
  if (ph == 'b') {
    stack.push_back(OpenSlice{ts, trace_.Intern(ev.name.text), cat, ParseArgs(ev)});
    return;
  }
  if (stack.empty()) {
    ++unmatched_end_;
    return;
  }
  const OpenSlice o = stack.back();
  stack.pop_back();
  if (ts < o.start_ns) throw EventError{"async e before its b (negative duration)"};
  // One async track per (process, category), named after the category.
  const std::string track_name = "async " + std::string(trace_.Str(cat));
  RawEvent tmp;
  tmp.pid = ev.pid;
  tmp.tid = RawValue{ValueType::kString, track_name};
  const TrackId track = TrackFor(tmp);
  AddSlice(track, o.start_ns, ts - o.start_ns, o.name, o.category, o.fields, slice_flags::kAsync);
}

void EventBuilder::TopLevel(std::string_view key, const Json& v) {
  TraceMetadata& m = trace_.metadata;
  if (key == "kind") {
    if (!v.is_string() || v.get<std::string>() != "trace") {
      throw EventError{"/kind: not a trace file (kind " + v.dump(-1, ' ', false, Json::error_handler_t::replace) + ")"};
    }
  } else if (key == "version") {
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kTraceFormatVersion) {
      throw EventError{"/version: unsupported trace version " + v.dump(-1, ' ', false, Json::error_handler_t::replace)};
    }
  } else if (key == "otherData" && v.is_object()) {
    auto str = [&](const char* k, std::string* out) {
      if (auto it = v.find(k); it != v.end() && it->is_string()) *out = it->get<std::string>();
    };
    str("trace_kind", &m.kind);
    str("tool_version", &m.tool_version);
    str("source", &m.source);
    str("comm_progress", &m.comm_progress);
    for (const char* k : {"plan", "model", "cluster"}) {
      if (auto it = v.find(k); it != v.end()) {
        (k[0] == 'p' ? m.plan : k[0] == 'm' ? m.model : m.cluster) = *it;
      }
    }
    if (auto it = v.find("rank"); it != v.end() && it->is_number_integer()) m.rank = it->get<int64_t>();
    if (auto it = v.find("world_size"); it != v.end() && it->is_number_integer()) {
      m.world_size = it->get<int64_t>();
    }
  } else if (key == "distributedInfo" && v.is_object()) {
    if (auto it = v.find("rank"); it != v.end() && it->is_number_integer()) m.rank = it->get<int64_t>();
    if (auto it = v.find("world_size"); it != v.end() && it->is_number_integer()) {
      m.world_size = it->get<int64_t>();
    }
  } else if (key == "schemaVersion") {
    if (m.tool_version.empty()) m.tool_version = "kineto schema " + v.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

void EventBuilder::Finish() {
  for (auto& [track, stack] : open_) unclosed_begin_ += static_cast<int64_t>(stack.size());
  for (auto& [key, stack] : async_) unclosed_begin_ += static_cast<int64_t>(stack.size());
  if (unclosed_begin_ > 0) Warn(std::to_string(unclosed_begin_) + " B/b events without an end were dropped");
  if (unmatched_end_ > 0) Warn(std::to_string(unmatched_end_) + " E/e events without a begin were ignored");
  if (bad_identity_ > 0) {
    Warn(std::to_string(bad_identity_) + " slices have an invalid op identity in args (op/phase/step...)");
  }
  const size_t unmatched_flows = flow_starts_.size() + flow_ends_.size();
  if (unmatched_flows > 0) Warn(std::to_string(unmatched_flows) + " flow events without their other end");
  if (dup_flow_ > 0) Warn(std::to_string(dup_flow_) + " flow events reuse a pending flow id");

  std::unordered_map<int64_t, std::string> names_of_ids;
  for (const auto& [s, id] : string_ids_) names_of_ids[id] = s;
  for (size_t i = 0; i < trace_.tracks().size(); ++i) {
    Track& t = trace_.track(static_cast<TrackId>(i));
    if (auto it = thread_names_.find({t.pid, t.tid}); it != thread_names_.end()) {
      t.name = it->second;
    } else if (auto s = names_of_ids.find(t.tid); s != names_of_ids.end()) {
      t.name = s->second;
    } else {
      t.name = "thread " + std::to_string(t.tid);
    }
    if (auto it = process_names_.find(t.pid); it != process_names_.end()) {
      t.process_name = it->second;
    } else if (auto s = names_of_ids.find(t.pid); s != names_of_ids.end()) {
      t.process_name = s->second;
    }
    if (auto it = process_labels_.find(t.pid); it != process_labels_.end()) {
      t.process_name += t.process_name.empty() ? it->second : " (" + it->second + ")";
    }
    if (auto it = thread_sort_.find({t.pid, t.tid}); it != thread_sort_.end()) t.sort_index = it->second;
  }
  if (trace_.metadata.kind.empty()) trace_.metadata.kind = "imported";
  ClassifyTracks(trace_);

  for (int c = 0; c < 128; ++c) {
    if (phase_counts_[c] > 0) stats_.phases[std::string(1, static_cast<char>(c))] += phase_counts_[c];
  }
  for (size_t cat = 0; cat < category_counts_.size(); ++cat) {
    const int64_t n = category_counts_[cat];
    if (n > 0) stats_.categories[std::string(trace_.Str(static_cast<StringId>(cat)))] += n;
  }
}

}  // namespace parallax::traces
