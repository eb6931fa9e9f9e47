#include "profiler/refine/dp_windows.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "profiler/calibrate/measurement.h"

namespace parallax::profiler {

bool CollectivesPolled(const traces::Trace& measured, const Plan& plan) {
  if (!measured.metadata.comm_progress.empty()) return measured.metadata.comm_progress == "host";
  return !plan.cluster.device.is_gpu();
}

void MeasureDpWindows(const traces::Trace& measured, const traces::Alignment& al, std::vector<OpInstance>& instances) {
  struct Run {
    int64_t begin, end;
    std::string key;
  };
  std::unordered_map<int64_t, std::vector<Run>> runs;  // per rank, compute ops by start
  std::unordered_map<std::string, std::vector<double>> alone;
  for (size_t i = 0; i < al.pairs.size(); ++i) {
    const traces::Slice& ms = measured.slice(al.pairs[i].second);
    const traces::Track& tr = measured.track(ms.track);
    if (tr.stream != traces::Stream::kCompute || ms.dur_ns <= 0) continue;
    std::string key = ComputeGroupKey(instances[i].id, instances[i].predicted_bytes);
    if (!instances[i].overlapped) alone[key].push_back(instances[i].measured_s);
    runs[tr.rank].push_back({ms.start_ns, ms.end_ns(), std::move(key)});
  }
  std::unordered_map<std::string, double> pace;
  for (auto& [key, v] : alone) {
    std::sort(v.begin(), v.end());
    pace[key] = Quantile(v, 0.5);
  }
  for (auto& [rank, v] : runs) {
    std::sort(v.begin(), v.end(), [](const Run& a, const Run& b) { return a.begin < b.begin; });
  }
  for (size_t i = 0; i < al.pairs.size(); ++i) {
    const traces::Slice& ms = measured.slice(al.pairs[i].second);
    const traces::Track& tr = measured.track(ms.track);
    if (tr.stream != traces::Stream::kDpComm || ms.dur_ns <= 0) continue;
    const int64_t b = ms.start_ns, e = ms.end_ns();
    double covered_s = 0, alone_s = 0;
    if (auto it = runs.find(tr.rank); it != runs.end()) {
      // Compute ops of one rank do not overlap one another: the first that may reach into the
      // window starts at most one op before it.
      const auto& v = it->second;
      auto r = std::lower_bound(v.begin(), v.end(), b, [](const Run& x, int64_t t) { return x.begin < t; });
      if (r != v.begin()) --r;
      for (; r != v.end() && r->begin < e; ++r) {
        const int64_t o = std::min(e, r->end) - std::max(b, r->begin);
        if (o <= 0) continue;
        const double dur_s = static_cast<double>(r->end - r->begin) * 1e-9;
        const auto p = pace.find(r->key);
        const double share = static_cast<double>(o) / static_cast<double>(r->end - r->begin);
        covered_s += static_cast<double>(o) * 1e-9;
        alone_s += (p != pace.end() ? std::min(p->second, dur_s) : dur_s) * share;
      }
    }
    instances[i].window_uncovered_s = std::max(0.0, instances[i].measured_s - covered_s);
    instances[i].window_compute_alone_s = alone_s;
  }
}

}  // namespace parallax::profiler
