#include "profiler/foreign/attribution.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "traces/kineto.h"

namespace parallax::profiler {
namespace {

bool IsDevice(const KinetoEvent& e) { return e.cat == "kernel" || e.cat == "gpu_memcpy" || e.cat == "gpu_memset"; }
bool IsRuntime(const KinetoEvent& e) { return e.cat == "cuda_runtime" || e.cat == "cuda_driver"; }
bool IsHost(const KinetoEvent& e) {
  return e.cat.empty() || e.cat == "cpu_op" || e.cat == "user_annotation" || e.cat == "python_function" || IsRuntime(e);
}
//! A host event that can be a unit of a CPU trace (an op or a record_function range).
bool IsHostOp(const KinetoEvent& e) { return e.cat.empty() || e.cat == "cpu_op" || e.cat == "user_annotation"; }
FrameKind HostFrameKind(const KinetoEvent& e) {
  return e.cat == "cpu_op" || e.cat.empty() ? FrameKind::kHostOp : FrameKind::kRange;
}
bool IsBackwardName(std::string_view n) {
  return n.find("Backward") != std::string_view::npos || n.find("evaluate_function") != std::string_view::npos;
}

struct Frame {
  FrameKind kind;
  std::string_view name;
};

//! An NCCL kernel named for no collective (ncclDevKernel_Generic) as the kernel rules know it: the
//! name NCCL gave kernels of the collective its "Collective name" argument records, or "".
std::string_view NcclKernelOfCollective(const KinetoEvent& e) {
  if (e.collective.empty() || !traces::IsNcclKernel(e.name) ||
      !traces::NcclCollectiveFromKernelName(e.name).empty()) {
    return {};
  }
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kKernels{{
      {"allreduce", "ncclDevKernel_AllReduce"},
      {"allgather", "ncclDevKernel_AllGather"},
      {"reducescatter", "ncclDevKernel_ReduceScatter"},
      {"send", "ncclDevKernel_SendRecv"},
      {"recv", "ncclDevKernel_SendRecv"},
  }};
  const std::string_view collective = traces::NcclCollectiveFromArg(e.collective);
  for (const auto& [c, kernel] : kKernels) {
    if (c == collective) return kernel;
  }
  return {};
}

//! Host nesting (parent per event, per thread), correlation and autograd-sequence indexes.
class HostIndex {
 public:
  HostIndex(const KinetoEvents& ev, const AttributionTable& table) : ev_(ev), table_(table) {
    parent_.assign(ev.events.size(), -1);
    std::unordered_map<uint64_t, std::vector<size_t>> stacks;  // (pid, tid) -> open events
    for (size_t i = 0; i < ev.events.size(); ++i) {
      const KinetoEvent& e = ev.events[i];
      if (IsRuntime(e) && e.correlation >= 0) runtime_[e.correlation] = i;
      if (!IsHost(e)) continue;
      if (e.sequence >= 0 && e.cat == "cpu_op" && !IsBackwardName(e.name)) forward_.emplace(e.sequence, i);
      auto& st = stacks[static_cast<uint64_t>(e.pid) * 1000003u ^ static_cast<uint64_t>(e.tid)];
      while (!st.empty() && ev.events[st.back()].end_ns() < e.end_ns()) st.pop_back();
      if (!st.empty()) parent_[i] = static_cast<int64_t>(st.back());
      st.push_back(i);
    }
  }

  int64_t Parent(size_t i) const { return parent_[i]; }
  bool IsWrapper(const KinetoEvent& e) const {
    return std::any_of(table_.wrappers.begin(), table_.wrappers.end(),
                       [&](std::string_view w) { return PatternMatches(w, e.name); });
  }
  //! The host event that launched device event `i`, or -1.
  int64_t Launcher(const KinetoEvent& e) const {
    auto it = runtime_.find(e.correlation);
    return e.correlation >= 0 && it != runtime_.end() ? static_cast<int64_t>(it->second) : -1;
  }
  //! Frames of host event `i` and its ancestors, innermost first; a backward node brings its
  //! forward op's frames (the same autograd sequence number) after its own.
  void AppendFrames(int64_t i, std::vector<Frame>& out, bool follow_forward = true) const {
    for (; i >= 0; i = parent_[static_cast<size_t>(i)]) {
      const KinetoEvent& e = ev_.events[static_cast<size_t>(i)];
      if (!IsRuntime(e)) out.push_back({HostFrameKind(e), e.name});
      if (!e.module.empty()) out.push_back({FrameKind::kRange, e.module});
      if (follow_forward && e.sequence >= 0 && IsBackwardName(e.name)) {
        if (auto it = forward_.find(e.sequence); it != forward_.end()) {
          AppendFrames(static_cast<int64_t>(it->second), out, false);
          follow_forward = false;
        }
      }
    }
  }

 private:
  const KinetoEvents& ev_;
  const AttributionTable& table_;
  std::vector<int64_t> parent_;
  std::unordered_map<int64_t, size_t> runtime_;
  std::unordered_map<int64_t, size_t> forward_;
};

const AttributionRule* MatchRule(const AttributionTable& table, const std::vector<Frame>& frames) {
  for (const AttributionRule& r : table.rules) {
    for (const Frame& f : frames) {
      // Host ops and ranges are one name space (the array form does not tell them apart).
      const bool kind_ok = (r.on == FrameKind::kKernel) == (f.kind == FrameKind::kKernel);
      if (kind_ok && PatternMatches(r.pattern, f.name)) return &r;
    }
  }
  return nullptr;
}

Phase PhaseOf(const AttributionRule* rule, const std::vector<Frame>& frames) {
  if (rule != nullptr && (rule->family == "optimizer" || rule->family == "grad_clip")) return Phase::kOptim;
  for (const Frame& f : frames) {
    if (f.kind != FrameKind::kKernel && IsBackwardName(f.name)) return Phase::kBwd;
  }
  return Phase::kFwd;
}

int64_t ElementCount(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * std::max<int64_t>(b, 0); });
}

//! A collective's message bytes: an NCCL kernel's recorded element count and dtype, or a host
//! range's first input (gloo:all_reduce's flattened bucket).
int64_t CollectiveBytes(const KinetoEvent& e) {
  if (e.in_nelems >= 0 && traces::KinetoDtypeBytes(e.dtype) > 0) return e.in_nelems * traces::KinetoDtypeBytes(e.dtype);
  if (!e.input_dims.empty() && !e.input_types.empty() && traces::KinetoDtypeBytes(e.input_types[0]) > 0) {
    return ElementCount(e.input_dims[0]) * traces::KinetoDtypeBytes(e.input_types[0]);
  }
  return -1;
}

//! Ops that only forward to one nested op: their time less the child's is one event's bookkeeping.
constexpr std::array<std::string_view, 12> kForwarding{
    "aten::t",         "aten::transpose", "aten::reshape", "aten::select",  "aten::slice",   "aten::expand",
    "aten::permute",   "aten::unsqueeze", "aten::squeeze", "aten::detach",  "aten::flatten", "aten::view_as"};

void EstimateOverhead(const KinetoEvents& ev, const HostIndex& idx, Attribution& a) {
  std::vector<int64_t> children(ev.events.size(), 0), only_child(ev.events.size(), -1);
  for (size_t i = 0; i < ev.events.size(); ++i) {
    if (const int64_t p = idx.Parent(i); p >= 0) {
      ++children[static_cast<size_t>(p)];
      only_child[static_cast<size_t>(p)] = static_cast<int64_t>(i);
    }
  }
  std::vector<int64_t> diffs;
  for (size_t i = 0; i < ev.events.size(); ++i) {
    const KinetoEvent& e = ev.events[i];
    if (IsHostOp(e)) ++a.recorded_events;
    if (children[i] != 1 || std::find(kForwarding.begin(), kForwarding.end(), e.name) == kForwarding.end()) continue;
    diffs.push_back(e.dur_ns - ev.events[static_cast<size_t>(only_child[i])].dur_ns);
  }
  a.overhead_pairs = static_cast<int64_t>(diffs.size());
  if (diffs.empty()) return;
  // The mean, not the median: the array form's timestamps are whole microseconds, and most
  // differences are 0 or 1 us; the mean of a quantised value is still the value's mean.
  const double sum = static_cast<double>(std::accumulate(diffs.begin(), diffs.end(), int64_t{0}));
  a.overhead_per_event_s = std::max(0.0, sum / static_cast<double>(diffs.size())) * 1e-9;
}

AttributedUnit MakeUnit(size_t i, const KinetoEvent& e, const AttributionTable& table, const std::vector<Frame>& frames) {
  AttributedUnit u;
  u.event = i;
  u.start_ns = e.ts_ns;
  u.dur_ns = e.dur_ns;
  u.device = IsDevice(e);
  u.rule = MatchRule(table, frames);
  u.phase = PhaseOf(u.rule, frames);
  u.comm = (u.rule != nullptr && u.rule->family == "collective") || traces::IsNcclKernel(e.name);
  if (u.comm) {
    u.bytes = CollectiveBytes(e);
    u.group_size = static_cast<int32_t>(e.group_size);
  }
  return u;
}

}  // namespace

Attribution Attribute(const KinetoEvents& ev, const AttributionTable& table) {
  Attribution a;
  const HostIndex idx(ev, table);
  a.device_trace = std::any_of(ev.events.begin(), ev.events.end(), [](const KinetoEvent& e) { return e.cat == "kernel"; });
  std::vector<int64_t> nested(ev.events.size(), 0);
  for (size_t i = 0; i < ev.events.size(); ++i) {
    for (int64_t p = idx.Parent(i); p >= 0; p = idx.Parent(static_cast<size_t>(p))) ++nested[static_cast<size_t>(p)];
  }
  std::vector<Frame> frames;
  for (size_t i = 0; i < ev.events.size(); ++i) {
    const KinetoEvent& e = ev.events[i];
    frames.clear();
    if (a.device_trace) {
      if (!IsDevice(e)) continue;
      if (const std::string_view k = NcclKernelOfCollective(e); !k.empty())
        frames.push_back({FrameKind::kKernel, k});
      frames.push_back({FrameKind::kKernel, e.name});
      a.launched_units += idx.Launcher(e) >= 0 ? 1 : 0;
      idx.AppendFrames(idx.Launcher(e), frames);
    } else {
      if (!IsHostOp(e) || idx.IsWrapper(e)) continue;
      bool nested_in_op = false;
      for (int64_t p = idx.Parent(i); p >= 0 && !nested_in_op; p = idx.Parent(static_cast<size_t>(p))) {
        const KinetoEvent& pe = ev.events[static_cast<size_t>(p)];
        nested_in_op = IsHostOp(pe) && !idx.IsWrapper(pe);
      }
      if (nested_in_op) continue;
      idx.AppendFrames(static_cast<int64_t>(i), frames);
    }
    AttributedUnit u = MakeUnit(i, e, table, frames);
    u.nested_events = a.device_trace ? 0 : nested[i];
    a.units.push_back(u);
  }
  std::stable_sort(a.units.begin(), a.units.end(),
                   [](const AttributedUnit& x, const AttributedUnit& y) { return x.start_ns < y.start_ns; });
  if (!a.units.empty()) {
    a.first_ns = a.units.front().start_ns;
    for (const auto& u : a.units) a.last_ns = std::max(a.last_ns, u.start_ns + u.dur_ns);
  }
  EstimateOverhead(ev, idx, a);
  return a;
}

}  // namespace parallax::profiler
