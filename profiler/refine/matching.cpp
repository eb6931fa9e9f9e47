#include "profiler/refine/matching.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <unordered_map>
#include <utility>

namespace parallax::profiler {
namespace {

//! The aligned ops' work against the plan's: the executor tags every compute op with the FLOPs the
//! op catalogue gives its identity (the same definition the prediction uses), so a trace of this
//! plan agrees op for op. A trace of another layout or model whose identities happen to match (a
//! trace without its plan in otherData) carries other FLOPs: refusing it keeps samples at the
//! wrong shapes out of the database.
Status MatchRecordedWork(const traces::Trace& predicted, const traces::Trace& measured, const traces::Alignment& al,
                         const std::string& file, const Plan& plan) {
  int64_t compared = 0, differ = 0;
  std::string first;
  for (const auto& [pi, mi] : al.pairs) {
    const traces::SliceArgs* pa = predicted.args(predicted.slice(pi));
    const traces::SliceArgs* ma = measured.args(measured.slice(mi));
    if (pa == nullptr || ma == nullptr || pa->flops <= 0 || ma->flops <= 0) continue;
    ++compared;
    if (std::abs(ma->flops - pa->flops) <= 1e-3 * pa->flops) continue;
    if (differ++ == 0) {
      const auto id = predicted.identity(predicted.slice(pi));
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s %s (layer %lld) ran %.4g FLOPs where the plan's has %.4g",
                    id ? ToString(id->op) : "?", id ? ToString(id->phase) : "?",
                    static_cast<long long>(id ? id->layer : -1), ma->flops, pa->flops);
      first = buf;
    }
  }
  if (compared == 0 || differ * 10 < compared) return Status::Ok();
  return BadInput(file + ": " + std::to_string(differ) + " of " + std::to_string(compared) +
                  " measured compute ops carry other work than the plan's (" + LayoutToString(plan.layout) + ", " +
                  plan.model.name + "), e.g. " + first + ": the trace is of another plan or model");
}

//! Per rank, the measured DP-communication intervals, sorted by start.
std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> DpIntervals(const traces::Trace& t) {
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> out;
  for (size_t i = 0; i < t.slices().size(); ++i) {
    const traces::Slice& s = t.slice(i);
    const traces::Track& tr = t.track(s.track);
    if (tr.stream != traces::Stream::kDpComm || s.dur_ns <= 0) continue;
    out[tr.rank].push_back({s.start_ns, s.end_ns()});
  }
  for (auto& [r, v] : out) std::sort(v.begin(), v.end());
  return out;
}

//! True when [b, e) intersects one of `v` (slices of one stream: sorted by start and by end).
bool Overlaps(const std::vector<std::pair<int64_t, int64_t>>& v, int64_t b, int64_t e) {
  auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(e, int64_t{0}));
  return it != v.begin() && std::prev(it)->second > b;
}

}  // namespace

Status MatchRecordedPlan(const traces::Trace& measured, const std::string& file, Plan& plan) {
  const Json& rec = measured.metadata.plan;
  if (rec.is_object() && rec.contains("layout")) {
    auto rec_layout = rec["layout"];
    const Json want = LayoutToJson(plan.layout);
    if (rec_layout != want) {
      const std::string ran = rec_layout.dump();
      return BadInput(file + ": /otherData/plan/layout: the trace is of another plan: it ran " + ran +
                      ", the plan to refine is " + want.dump());
    }
    if (rec.contains("training") && rec["training"].is_object() && rec["training"].contains("precision")) {
      const std::string p = rec["training"]["precision"].is_string() ? rec["training"]["precision"].get<std::string>() : "";
      if (auto q = PrecisionFromString(p)) plan.training.precision = *q;
    }
  }
  if (measured.metadata.model.is_string() && measured.metadata.model.get<std::string>() != plan.model.name) {
    return BadInput(file + ": /otherData/model: the trace ran model \"" + measured.metadata.model.get<std::string>() +
                    "\", the plan's model is \"" + plan.model.name + "\"");
  }
  return Status::Ok();
}

Result<traces::Alignment> AlignWithPlan(const traces::Trace& predicted, const traces::Trace& measured,
                                        const std::string& file, const Plan& plan) {
  traces::Alignment al = traces::AlignSlices(predicted, measured);
  if (al.mode != traces::AlignMode::kIdentity) {
    return BadInput(file + ": its slices carry no op identities (record it with `parallax run --trace`)");
  }
  if (al.pairs.empty()) {
    return BadInput(file + ": no measured op matches an op identity of the plan (" +
                    LayoutToString(plan.layout) + "): the trace is of another plan");
  }
  const double matched_share =
      static_cast<double>(al.pairs.size()) / static_cast<double>(al.pairs.size() + static_cast<size_t>(al.only_measured));
  if (matched_share < 0.5) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f%%", matched_share * 100);
    return BadInput(file + ": only " + buf + " of its measured ops match the plan's op identities (" +
                    LayoutToString(plan.layout) + "): the trace is of another plan");
  }
  PX_TRY(MatchRecordedWork(predicted, measured, al, file, plan));
  return al;
}

std::vector<OpInstance> MatchedInstances(const traces::Trace& predicted, const traces::Trace& measured,
                                         const traces::Alignment& al) {
  const auto dp = DpIntervals(measured);
  std::vector<OpInstance> instances;
  instances.reserve(al.pairs.size());
  for (const auto& [pi, mi] : al.pairs) {
    const traces::Slice& ps = predicted.slice(pi);
    const traces::Slice& ms = measured.slice(mi);
    OpInstance in;
    in.id = *predicted.identity(ps);
    const traces::SliceArgs* args = predicted.args(ps);
    in.predicted_bytes = args ? args->bytes : -1;
    in.measured_s = static_cast<double>(ms.dur_ns) * 1e-9;
    if (const auto mid = measured.identity(ms)) in.measured_step = mid->step;
    const traces::Track& tr = measured.track(ms.track);
    if (tr.stream == traces::Stream::kCompute) {
      auto it = dp.find(tr.rank);
      in.overlapped = it != dp.end() && Overlaps(it->second, ms.start_ns, ms.end_ns());
    }
    instances.push_back(in);
  }
  return instances;
}

}  // namespace parallax::profiler
