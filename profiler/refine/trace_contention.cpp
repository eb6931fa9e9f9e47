#include "profiler/refine/trace_contention.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/calibrate/calibrate.h"

namespace parallax::profiler {
namespace {

//! Per rank, the union of the measured compute slices, sorted and disjoint.
std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> ComputeCover(const traces::Trace& t) {
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> raw;
  for (size_t i = 0; i < t.slices().size(); ++i) {
    const traces::Slice& s = t.slice(i);
    const traces::Track& tr = t.track(s.track);
    if (tr.stream == traces::Stream::kCompute && s.dur_ns > 0) raw[tr.rank].push_back({s.start_ns, s.end_ns()});
  }
  for (auto& [r, v] : raw) {
    std::sort(v.begin(), v.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& iv : v) {
      if (!merged.empty() && iv.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, iv.second);
      } else {
        merged.push_back(iv);
      }
    }
    v = std::move(merged);
  }
  return raw;
}

//! Length of [b, e) that `cover` (sorted, disjoint) covers.
int64_t Covered(const std::vector<std::pair<int64_t, int64_t>>& cover, int64_t b, int64_t e) {
  int64_t n = 0;
  auto it = std::lower_bound(cover.begin(), cover.end(), std::make_pair(b, int64_t{0}));
  if (it != cover.begin()) --it;
  for (; it != cover.end() && it->first < e; ++it) n += std::max<int64_t>(0, std::min(e, it->second) - std::max(b, it->first));
  return n;
}

}  // namespace

std::optional<double> TraceContention(const traces::Trace& predicted, const traces::Trace& measured,
                                      const traces::Alignment& al) {
  const auto cover = ComputeCover(measured);
  // Per rank, the measured compute ops by start, and whether each waits for every reduction (the
  // grad-norm read and the optimizer step).
  struct Run {
    int64_t begin, end;
    bool waits;
  };
  std::unordered_map<int64_t, std::vector<Run>> runs;
  for (size_t i = 0; i < measured.slices().size(); ++i) {
    const traces::Slice& s = measured.slice(i);
    const traces::Track& tr = measured.track(s.track);
    if (tr.stream != traces::Stream::kCompute) continue;
    const auto id = measured.identity(s);
    runs[tr.rank].push_back({s.start_ns, s.end_ns(), id && (id->op == OpKind::kGradClip || id->op == OpKind::kOptimizer)});
  }
  for (auto& [rank, v] : runs) {
    std::sort(v.begin(), v.end(), [](const Run& a, const Run& b) { return a.begin < b.begin; });
  }
  double isolated = 0, uncovered = 0;
  for (const auto& [pi, mi] : al.pairs) {
    const traces::Slice& ms = measured.slice(mi);
    const traces::Track& tr = measured.track(ms.track);
    if (tr.stream != traces::Stream::kDpComm || ms.dur_ns <= 0) continue;
    const auto id = predicted.identity(predicted.slice(pi));
    if (!id || (id->op != OpKind::kDpAllReduce && id->op != OpKind::kDpReduceScatter)) continue;
    auto it = cover.find(tr.rank);
    if (it == cover.end() || it->second.empty()) continue;
    const auto& c = it->second;
    if (c.front().first >= ms.start_ns) continue;  // no compute before it
    // The compute running at its end, or the next after it, must be of the backward: a reduction
    // the grad-norm read or the optimizer waits for (the last buckets) is exposed by that
    // dependency, whatever compute could hide.
    const auto& v = runs[tr.rank];
    auto at = std::upper_bound(v.begin(), v.end(), ms.end_ns(), [](int64_t t, const Run& x) { return t < x.begin; });
    if (at != v.begin() && std::prev(at)->end > ms.end_ns()) --at;
    if (at == v.end() || at->waits) continue;
    isolated += static_cast<double>(predicted.slice(pi).dur_ns);
    uncovered += static_cast<double>(ms.dur_ns - Covered(c, ms.start_ns, ms.end_ns()));
  }
  if (isolated <= 0) return std::nullopt;
  return ContentionFromOverlap(0, isolated, uncovered);
}

}  // namespace parallax::profiler
