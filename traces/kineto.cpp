#include "traces/kineto.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

namespace parallax::traces {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

bool IsNcclKernel(std::string_view name) {
  return StartsWith(name, "ncclKernel_") || StartsWith(name, "ncclDevKernel_");
}

std::string_view NcclCollectiveFromKernelName(std::string_view name) {
  if (StartsWith(name, "ncclKernel_")) {
    name.remove_prefix(11);
  } else if (StartsWith(name, "ncclDevKernel_")) {
    name.remove_prefix(14);
  } else {
    return {};
  }
  // Longest names first: "AllReduce" before "Reduce", "SendRecv" before "Send".
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kNames{{
      {"AllReduce", "allreduce"},
      {"AllGather", "allgather"},
      {"ReduceScatter", "reducescatter"},
      {"AllToAll", "alltoall"},
      {"Broadcast", "broadcast"},
      {"SendRecv", "sendrecv"},
      {"Reduce", "reduce"},
      {"Send", "send"},
      {"Recv", "recv"},
  }};
  for (const auto& [prefix, collective] : kNames) {
    if (StartsWith(name, prefix)) return collective;
  }
  return {};
}

std::string_view NcclCollectiveFromArg(std::string_view arg) {
  // Substrings, most specific first ("reduce_scatter" holds no "allreduce"; "all_to_all" before
  // "all").
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kNames{{
      {"allreduce", "allreduce"},
      {"all_reduce", "allreduce"},
      {"allgather", "allgather"},
      {"all_gather", "allgather"},
      {"reduce_scatter", "reducescatter"},
      {"reducescatter", "reducescatter"},
      {"all_to_all", "alltoall"},
      {"alltoall", "alltoall"},
      {"broadcast", "broadcast"},
      {"send", "send"},
      {"recv", "recv"},
      {"reduce", "reduce"},
  }};
  for (const auto& [part, collective] : kNames) {
    if (arg.find(part) != std::string_view::npos) return collective;
  }
  return {};
}

int KinetoDtypeBytes(std::string_view dtype) {
  static constexpr std::array<std::pair<std::string_view, int>, 14> kSizes{{
      {"Float", 4}, {"float", 4}, {"Int", 4}, {"Half", 2}, {"BFloat16", 2}, {"Short", 2},
      {"Double", 8}, {"Long", 8}, {"ComplexFloat", 8}, {"Byte", 1}, {"Char", 1}, {"Bool", 1},
      {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1},
  }};
  for (const auto& [name, bytes] : kSizes) {
    if (dtype == name) return bytes;
  }
  return 0;
}

std::string_view KinetoCategory(std::string_view category) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kLegacy{{
      {"Kernel", "kernel"},
      {"Runtime", "cuda_runtime"},
      {"Memcpy", "gpu_memcpy"},
      {"Memset", "gpu_memset"},
      {"Operator", "cpu_op"},
      {"Python", "python_function"},
  }};
  for (const auto& [legacy, name] : kLegacy) {
    if (category == legacy) return name;
  }
  return category;
}

uint8_t SliceFlagsFor(std::string_view category, std::string_view name) {
  category = KinetoCategory(category);
  if (category == "kernel") return IsNcclKernel(name) ? slice_flags::kComm : slice_flags::kCompute;
  if (category == "gpu_memcpy" || category == "gpu_memset") return slice_flags::kMemory;
  if (category == "compute") return slice_flags::kCompute;
  if (category == "tp-comm" || category == "dp-comm" || category == "pp-comm" || category == "comm") {
    return slice_flags::kComm;
  }
  return 0;
}

bool IsHostCategory(std::string_view c) {
  c = KinetoCategory(c);
  return c == "cpu_op" || c == "cuda_runtime" || c == "cuda_driver" || c == "user_annotation" ||
         c == "python_function" || c == "host";
}

void ClassifyTracks(Trace& trace) {
  struct Seen {
    bool device = false, compute = false, comm = false, host = false;
  };
  std::vector<Seen> seen(trace.tracks().size());
  // What a category says, once per category rather than once per slice.
  std::vector<uint8_t> cat_kind(trace.strings().size(), 0);  // bit 0 device, bit 1 host, bit 7 known
  trace.slices().ForEach([&](const Slice& s) {
    Seen& k = seen[s.track];
    if (s.has(slice_flags::kCompute) || s.has(slice_flags::kMemory)) k.device = true;
    if (s.has(slice_flags::kCompute)) k.compute = true;
    if (s.has(slice_flags::kComm)) {
      k.device = true;
      k.comm = true;
    }
    uint8_t& ck = cat_kind[s.category];
    if (ck == 0) {
      const std::string_view cat = trace.Str(s.category);
      ck = static_cast<uint8_t>(0x80 | (cat == "gpu_user_annotation" ? 1 : 0) | (IsHostCategory(cat) ? 2 : 0));
    }
    if ((ck & 1) != 0) k.device = true;
    if ((ck & 2) != 0) k.host = true;
  });
  for (size_t i = 0; i < seen.size(); ++i) {
    Track& t = trace.track(static_cast<TrackId>(i));
    if (auto stream = StreamFromString(t.name); stream && t.pid >= 0) {
      t.stream = *stream;
      t.rank = t.pid;
      t.device = *stream != Stream::kHost && *stream != Stream::kOther;
    } else if (seen[i].device) {
      t.device = true;
      t.stream = seen[i].comm && !seen[i].compute ? Stream::kComm : Stream::kCompute;
      t.rank = trace.metadata.rank >= 0 ? trace.metadata.rank : t.pid;
    } else if (seen[i].host) {
      t.device = false;
      t.stream = Stream::kHost;
      t.rank = trace.metadata.rank;
    } else {
      t.device = false;
      t.stream = Stream::kOther;
    }
  }
}

Trace ToParallaxLayout(const Trace& in) {
  Trace out;
  out.metadata.kind = in.metadata.kind.empty() ? "imported" : in.metadata.kind;
  out.metadata.tool_version = in.metadata.tool_version;
  out.metadata.source = in.metadata.source;
  out.metadata.plan = in.metadata.plan;
  out.metadata.model = in.metadata.model;
  out.metadata.cluster = in.metadata.cluster;
  out.metadata.rank = in.metadata.rank;
  out.metadata.world_size = in.metadata.world_size;
  out.metadata.comm_progress = in.metadata.comm_progress;

  // Order the original tracks: by rank, then stream kind, then original (pid, tid).
  std::vector<TrackId> order(in.tracks().size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<TrackId>(i);
  std::sort(order.begin(), order.end(), [&](TrackId a, TrackId b) {
    const Track& x = in.track(a);
    const Track& y = in.track(b);
    if (x.rank != y.rank) return x.rank < y.rank;
    if (x.stream != y.stream) return x.stream < y.stream;
    if (x.pid != y.pid) return x.pid < y.pid;
    return x.tid < y.tid;
  });
  std::map<std::pair<int64_t, Stream>, int> per_kind;  // how many tracks of a kind per rank
  for (const Track& t : in.tracks()) {
    if (t.rank >= 0) ++per_kind[{t.rank, t.stream}];
  }
  std::map<std::pair<int64_t, Stream>, int> ordinal;
  std::vector<TrackId> map(in.tracks().size());
  for (TrackId id : order) {
    const Track& t = in.track(id);
    Track n = t;
    if (t.rank >= 0) {
      const int k = ordinal[{t.rank, t.stream}]++;
      n.pid = t.rank;
      n.tid = static_cast<int64_t>(t.stream) * 1000 + k;
      n.sort_index = n.tid;
      n.process_name = "rank " + std::to_string(t.rank);
      n.name = ToString(t.stream);
      if (per_kind[{t.rank, t.stream}] > 1 || t.stream == Stream::kHost) {
        n.name += t.device ? " (stream " + std::to_string(t.tid) + ")"
                           : " (thread " + std::to_string(t.tid) + ")";
      }
    }
    map[id] = out.AddTrack(std::move(n));
  }
  std::vector<StringId> str(in.strings().size());
  for (size_t i = 0; i < str.size(); ++i) str[i] = out.Intern(in.Str(static_cast<StringId>(i)));
  out.ReserveSlices(in.slices().size());
  in.slices().ForEach([&](const Slice& s) {
    Slice c = s;
    c.track = map[s.track];
    c.name = str[s.name];
    c.category = str[s.category];
    if (const SliceArgs* a = in.args(s)) {
      SliceArgs ca = *a;
      ca.collective = str[a->collective];
      c.args = out.AddArgs(ca);
    }
    out.AddSlice(c);
  });
  in.flows().ForEach([&](const Flow& f) {
    Flow c = f;
    c.from_track = map[f.from_track];
    c.to_track = map[f.to_track];
    c.name = str[f.name];
    c.category = str[f.category];
    out.AddFlow(c);
  });
  in.counters().ForEach([&](const CounterSample& cs) {
    CounterSample c = cs;
    c.track = map[cs.track];
    c.name = str[cs.name];
    c.series = str[cs.series];
    out.AddCounter(c);
  });
  return out;
}

}  // namespace parallax::traces
