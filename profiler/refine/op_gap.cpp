#include "profiler/refine/op_gap.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace parallax::profiler {

OpGap MeasureOpGap(const traces::Trace& measured) {
  // Per rank: the recorded compute ops (identity slices; a device-detail slice has none) and the
  // intervals of its other recorded ops (collectives, sends, receives).
  struct Op {
    int64_t begin, end, step, mb;
    Phase phase;
  };
  std::unordered_map<int64_t, std::vector<Op>> compute;
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> other;
  int64_t last_step = 0;
  for (size_t i = 0; i < measured.slices().size(); ++i) {
    const traces::Slice& s = measured.slice(i);
    const auto id = measured.identity(s);
    if (!id) continue;
    const traces::Track& tr = measured.track(s.track);
    if (tr.stream == traces::Stream::kCompute) {
      compute[tr.rank].push_back({s.start_ns, s.end_ns(), id->step, id->microbatch, id->phase});
      last_step = std::max(last_step, id->step);
    } else {
      other[tr.rank].push_back({s.start_ns, s.end_ns()});
    }
  }
  OpGap g;
  double sum_ns = 0;
  for (auto& [rank, ops] : compute) {
    std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.begin < b.begin; });
    auto& iv = other[rank];
    std::sort(iv.begin(), iv.end());
    // The latest end among intervals [0, i]: the rank's streams nest, so ends are not sorted.
    std::vector<int64_t> max_end(iv.size());
    for (size_t i = 0; i < iv.size(); ++i) {
      max_end[i] = std::max(i > 0 ? max_end[i - 1] : std::numeric_limits<int64_t>::min(), iv[i].second);
    }
    for (size_t i = 0; i + 1 < ops.size(); ++i) {
      const Op& a = ops[i];
      const Op& b = ops[i + 1];
      // Two ops of one micro-batch's forward, backward or recompute, in a step after the first
      // (the first allocates and warms up) when there are several.
      if (a.step != b.step || (last_step > 0 && a.step == 0) || a.mb < 0 || a.mb != b.mb || a.phase != b.phase ||
          a.phase == Phase::kOptim) {
        continue;
      }
      // Nothing else of the rank between them: a wait for a collective or a receive is no host gap.
      const auto at =
          std::lower_bound(iv.begin(), iv.end(), std::make_pair(b.begin, std::numeric_limits<int64_t>::min()));
      if (at != iv.begin() && max_end[static_cast<size_t>(at - iv.begin()) - 1] > a.end) continue;
      sum_ns += static_cast<double>(std::max<int64_t>(0, b.begin - a.end));
      ++g.pairs;
    }
  }
  if (g.pairs > 0) g.mean_s = sum_ns * 1e-9 / static_cast<double>(g.pairs);
  return g;
}

}  // namespace parallax::profiler
