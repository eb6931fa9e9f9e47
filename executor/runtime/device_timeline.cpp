#include "executor/runtime/device_timeline.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace parallax::executor {

const char* ToString(ActivityKind k) {
  switch (k) {
    // Kineto's categories, so traces readers (ours included) classify the tracks.
    case ActivityKind::kKernel: return "kernel";
    case ActivityKind::kMemcpy: return "gpu_memcpy";
    case ActivityKind::kMemset: return "gpu_memset";
    case ActivityKind::kRuntime: return "cuda_runtime";
    case ActivityKind::kSync: return "cuda_sync";
  }
  return "kernel";
}

bool IsNcclKernel(std::string_view name) {
  // Plain or mangled (CUPTI reports mangled names: "_Z24ncclDevKernel_AllReduce...").
  return name.find("ncclKernel") != std::string_view::npos || name.find("ncclDevKernel") != std::string_view::npos;
}

namespace {

bool IsDeviceWork(ActivityKind k) {
  return k == ActivityKind::kKernel || k == ActivityKind::kMemcpy || k == ActivityKind::kMemset;
}

}  // namespace

TimelineSummary BuildDeviceTimeline(std::span<const ActivityRecord> records, std::span<const ExternalLink> links,
                                    uint64_t first_key, std::span<MeasuredOp> ops,
                                    std::vector<DeviceSlice>& slices, int64_t fallback_offset_ns) {
  TimelineSummary sum;
  std::unordered_map<uint32_t, int64_t> op_of_corr;
  op_of_corr.reserve(links.size());
  for (const ExternalLink& l : links) {
    if (l.op_key >= first_key && l.op_key - first_key < ops.size()) {
      op_of_corr[l.correlation] = static_cast<int64_t>(l.op_key - first_key);
    }
  }
  // The runtime call behind each correlation id (its host start and thread).
  std::unordered_map<uint32_t, const ActivityRecord*> launch_of_corr;
  for (const ActivityRecord& r : records) {
    if (r.kind == ActivityKind::kRuntime && r.correlation != 0) launch_of_corr[r.correlation] = &r;
  }

  // Device span of each op, in the tracer's clock.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> first(ops.size(), kNone), last(ops.size(), std::numeric_limits<int64_t>::min());
  std::vector<int64_t> op_of_record(records.size(), -1);
  for (size_t i = 0; i < records.size(); ++i) {
    const ActivityRecord& r = records[i];
    if (!IsDeviceWork(r.kind)) continue;
    ++sum.device_records;
    const bool nccl = r.kind == ActivityKind::kKernel && IsNcclKernel(r.name);
    sum.nccl_kernels += nccl ? 1 : 0;
    const auto it = op_of_corr.find(r.correlation);
    if (r.correlation == 0 || it == op_of_corr.end()) continue;
    const auto op = static_cast<size_t>(it->second);
    op_of_record[i] = it->second;
    ++sum.attributed;
    if (nccl && StreamOf(ops[op].id.op) != traces::Stream::kCompute) ++sum.nccl_in_collectives;
    first[op] = std::min(first[op], r.start_ns);
    last[op] = std::max(last[op], std::max(r.start_ns, r.end_ns));
  }

  // Clock alignment: the median of (event start - device start) over ops timed both ways.
  std::vector<int64_t> deltas;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (first[i] != kNone) deltas.push_back(ops[i].start_ns - first[i]);
  }
  if (!deltas.empty()) {
    std::nth_element(deltas.begin(), deltas.begin() + static_cast<std::ptrdiff_t>(deltas.size() / 2), deltas.end());
    sum.clock_offset_ns = deltas[deltas.size() / 2];
    sum.aligned = true;
  } else {
    sum.clock_offset_ns = fallback_offset_ns;
  }
  const int64_t off = sum.clock_offset_ns;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (first[i] == kNone) continue;
    ops[i].start_ns = first[i] + off;
    ops[i].dur_ns = last[i] - first[i];
    ++sum.ops_retimed;
  }

  slices.reserve(slices.size() + records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const ActivityRecord& r = records[i];
    DeviceSlice s;
    s.kind = r.kind;
    s.start_ns = r.start_ns + off;
    s.dur_ns = std::max<int64_t>(0, r.end_ns - r.start_ns);
    s.stream = r.stream;
    s.op = op_of_record[i];
    s.bytes = r.bytes;
    s.name = r.name;
    if (IsDeviceWork(r.kind)) {
      s.nccl = r.kind == ActivityKind::kKernel && IsNcclKernel(r.name);
      if (const auto it = launch_of_corr.find(r.correlation); r.correlation != 0 && it != launch_of_corr.end()) {
        s.launch_ns = it->second->start_ns + off;
        s.launch_thread = it->second->stream;
      }
    } else if (r.kind == ActivityKind::kRuntime) {
      if (const auto it = op_of_corr.find(r.correlation); r.correlation != 0 && it != op_of_corr.end()) s.op = it->second;
    }
    slices.push_back(std::move(s));
  }
  return sum;
}

}  // namespace parallax::executor
