#include "profiler/refine/refine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <unordered_map>

#include "planner/sim/simulator.h"
#include "profiler/calibrate/calibrate.h"
#include "profiler/calibrate/measurement.h"
#include "profiler/refine/op_catalog.h"
#include "profiler/refine/sample_fit.h"

namespace parallax::profiler {
namespace {

double Rel(double predicted, double measured) { return measured > 0 ? (predicted - measured) / measured : 0; }

//! How reports name a run factor: "gemm/bf16" (GEMM factors are per dtype), else the family.
std::string RunFactorName(const RunFactor& f) {
  return f.family == "gemm" ? f.family + "/" + ToString(f.dtype) : f.family;
}

//! Checks what the measured trace says it ran against the plan; adopts its training precision.
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
      if (p == "fp32") plan.training.precision = Precision::kFp32;
      if (p == "bf16") plan.training.precision = Precision::kBf16;
      if (p == "fp16") plan.training.precision = Precision::kFp16;
    }
  }
  if (measured.metadata.model.is_string() && measured.metadata.model.get<std::string>() != plan.model.name) {
    return BadInput(file + ": /otherData/model: the trace ran model \"" + measured.metadata.model.get<std::string>() +
                    "\", the plan's model is \"" + plan.model.name + "\"");
  }
  return Status::Ok();
}

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

namespace {

std::map<std::string, std::pair<int64_t, std::pair<double, double>>> ByFamily(const traces::TraceDiff& d) {
  std::map<std::string, std::pair<int64_t, std::pair<double, double>>> f;  // op -> matched, (pred, meas)
  for (const auto& o : d.per_op) {
    auto& e = f[o.op];
    e.first += o.matched;
    e.second.first += static_cast<double>(o.predicted_ns) * 1e-9;
    e.second.second += static_cast<double>(o.measured_ns) * 1e-9;
  }
  return f;
}

Result<traces::Trace> Predict(const Plan& plan, const CostDb& db) {
  planner::SimOptions so;
  so.record_trace = true;
  so.all_ranks = true;
  auto sim = planner::Simulate(plan, &db, so);
  if (!sim) return sim.error();
  return std::move(*sim->trace);
}

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

//! Whether the measured run's collectives advanced only when its host thread polled them (the CPU
//! backend): as the trace says, else as its device implies (only the CPU backend runs a plan whose
//! device is not a GPU: `--backend cuda` refuses such a cluster).
bool CollectivesPolled(const traces::Trace& measured, const Plan& plan) {
  if (!measured.metadata.comm_progress.empty()) return measured.metadata.comm_progress == "host";
  return !plan.cluster.device.is_gpu();
}

//! Fills the window fields of the DP-communication instances (`instances[i]` is the measured slice
//! of `al.pairs[i]`): the part of each slice's window no compute op of its rank covers, and the
//! compute inside it at its alone pace: each compute op's median over its instances that no DP
//! slice overlaps (pooled as FitSamples pools them, ComputeGroupKey), its own length where it has none.
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

Result<RefineResult> Refine(const Plan& plan_in, const traces::Trace& measured, const std::string& trace_file,
                            const CostDb& db_in) {
  RefineResult r;
  r.plan = plan_in;
  if (Status s = MatchRecordedPlan(measured, trace_file, r.plan); !s) return s.error();
  auto predicted = Predict(r.plan, db_in);
  if (!predicted) return predicted.error();
  const traces::Alignment al = traces::AlignSlices(*predicted, measured);
  if (al.mode != traces::AlignMode::kIdentity) {
    return BadInput(trace_file + ": its slices carry no op identities (record it with `parallax run --trace`)");
  }
  if (al.pairs.empty()) {
    return BadInput(trace_file + ": no measured op matches an op identity of the plan (" +
                    LayoutToString(r.plan.layout) + "): the trace is of another plan");
  }
  const double matched_share =
      static_cast<double>(al.pairs.size()) / static_cast<double>(al.pairs.size() + static_cast<size_t>(al.only_measured));
  if (matched_share < 0.5) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f%%", matched_share * 100);
    return BadInput(trace_file + ": only " + buf + " of its measured ops match the plan's op identities (" +
                    LayoutToString(r.plan.layout) + "): the trace is of another plan");
  }

  if (Status s = MatchRecordedWork(*predicted, measured, al, trace_file, r.plan); !s) return s.error();

  const auto dp = DpIntervals(measured);
  std::vector<OpInstance> instances;
  instances.reserve(al.pairs.size());
  for (const auto& [pi, mi] : al.pairs) {
    const traces::Slice& ps = predicted->slice(pi);
    const traces::Slice& ms = measured.slice(mi);
    OpInstance in;
    in.id = *predicted->identity(ps);
    const traces::SliceArgs* args = predicted->args(ps);
    in.predicted_bytes = args ? args->bytes : -1;
    in.measured_s = static_cast<double>(ms.dur_ns) * 1e-9;
    const traces::Track& tr = measured.track(ms.track);
    if (tr.stream == traces::Stream::kCompute) {
      auto it = dp.find(tr.rank);
      in.overlapped = it != dp.end() && Overlaps(it->second, ms.start_ns, ms.end_ns());
    }
    instances.push_back(in);
  }
  r.collectives_polled = CollectivesPolled(measured, r.plan);
  if (r.collectives_polled) MeasureDpWindows(measured, al, instances);

  OpCatalog catalog(r.plan, &db_in);
  const std::optional<double> trace_k = TraceContention(*predicted, measured, al);
  FittedSamples fitted = FitSamples(catalog, instances, std::max(db_in.contention_factor, trace_k.value_or(1.0)));
  if (auto k = trace_k; k && (!fitted.contention_factor || *k > *fitted.contention_factor)) {
    fitted.contention_factor = *k;
    fitted.contention.source = "refine";
  }
  r.instances_used = fitted.instances_used;
  r.not_sampled = fitted.not_sampled;
  r.db = db_in;
  r.merged = MergeSamples(fitted, r.db);
  r.run_op_times = fitted.run_op_times;
  r.contention_refitted = r.merged.contention_raised;
  r.op_gap = MeasureOpGap(measured);
  if (r.op_gap.applied()) r.db.op_gap_us = r.op_gap.mean_s * 1e6;

  r.before = traces::DiffTraces(*predicted, measured);
  auto after = Predict(r.plan, r.db);
  if (!after) return after.error();
  r.after = traces::DiffTraces(*after, measured);
  const auto fb = ByFamily(r.before);
  const auto fa = ByFamily(r.after);
  for (const auto& [op, e] : fb) {
    OpFamilyError f;
    f.op = op;
    f.matched = e.first;
    f.measured_s = e.second.second;
    f.predicted_before_s = e.second.first;
    auto it = fa.find(op);
    f.predicted_after_s = it != fa.end() ? it->second.second.first : 0;
    f.error_before = Rel(f.predicted_before_s, f.measured_s);
    f.error_after = Rel(f.predicted_after_s, f.measured_s);
    r.families.push_back(f);
  }
  std::sort(r.families.begin(), r.families.end(),
            [](const OpFamilyError& a, const OpFamilyError& b) { return a.measured_s > b.measured_s; });
  return r;
}

Json RefineToJson(const RefineResult& r) {
  Json fam = Json::array();
  for (const auto& f : r.families) {
    fam.push_back({{"op", f.op}, {"matched", f.matched}, {"measured_s", f.measured_s},
                   {"predicted_before_s", f.predicted_before_s}, {"predicted_after_s", f.predicted_after_s},
                   {"error_before", f.error_before}, {"error_after", f.error_after}});
  }
  Json not_sampled = Json::object();
  for (const auto& [why, n] : r.not_sampled) not_sampled[why] = n;
  Json run_factors = Json::object();
  // "gemm/<dtype>" for GEMMs (a database may hold factors of two dtypes), else the kernel family.
  for (const auto& f : r.db.run_factors) run_factors[RunFactorName(f)] = f.factor;
  const auto& m = r.merged;
  Json out{{"layout", LayoutToString(r.plan.layout)},
           {"step_time", {{"measured_s", static_cast<double>(r.before.measured_step_ns) * 1e-9},
                          {"predicted_before_s", static_cast<double>(r.before.predicted_step_ns) * 1e-9},
                          {"predicted_after_s", static_cast<double>(r.after.predicted_step_ns) * 1e-9},
                          {"error_before", r.before.step_time_error},
                          {"error_after", r.after.step_time_error},
                          {"measured_steps", r.before.measured_steps}}},
           {"families", fam},
           {"samples", {{"instances", r.instances_used},
                        {"gemms_added", m.gemms_added}, {"gemms_replaced", m.gemms_replaced},
                        {"kernels_added", m.kernels_added}, {"kernels_replaced", m.kernels_replaced},
                        {"collective_points_added", m.collective_points_added},
                        {"collective_points_replaced", m.collective_points_replaced},
                        {"collectives_polled", r.collectives_polled}}},
           {"not_sampled", not_sampled},
           {"contention", {{"refitted", r.contention_refitted}, {"factor", r.db.contention_factor}, {"trace_ratio", r.merged.contention_ratio}}},
           {"run_factors", run_factors}};
  if (r.run_op_times.measured()) {
    out["run_op_times"] = {{"mean_over_median", r.run_op_times.mean_over_median},
                           {"instances", r.run_op_times.instances},
                           {"disturbed", RunDisturbed(r.run_op_times)}};
  }
  out["op_gap"] = {{"mean_us", r.op_gap.mean_s * 1e6}, {"pairs", r.op_gap.pairs},
                   {"applied", r.op_gap.applied()}};
  return out;
}

std::string FormatRefine(const RefineResult& r) {
  std::string out;
  char buf[256];
  const double meas = static_cast<double>(r.before.measured_step_ns) * 1e-9;
  std::snprintf(buf, sizeof buf, "refine %s on %zu measured step(s)\n", LayoutToString(r.plan.layout).c_str(),
                r.before.measured_steps.size());
  out += buf;
  std::snprintf(buf, sizeof buf, "step time: measured %.3f ms, predicted %.3f ms (%+.1f%%) before, %.3f ms (%+.1f%%) after\n",
                meas * 1e3, static_cast<double>(r.before.predicted_step_ns) * 1e-6, r.before.step_time_error * 100,
                static_cast<double>(r.after.predicted_step_ns) * 1e-6, r.after.step_time_error * 100);
  out += buf;
  std::snprintf(buf, sizeof buf, "%-14s %8s %12s %10s %10s\n", "op", "matched", "measured", "before", "after");
  out += buf;
  for (const auto& f : r.families) {
    std::snprintf(buf, sizeof buf, "%-14s %8lld %9.3f ms %+9.1f%% %+9.1f%%\n", f.op.c_str(),
                  static_cast<long long>(f.matched), f.measured_s * 1e3, f.error_before * 100, f.error_after * 100);
    out += buf;
  }
  const auto& m = r.merged;
  char ratio[160];
  std::snprintf(ratio, sizeof ratio, "the trace's contention %.3f", m.contention_ratio);
  const std::string contention_note =
      m.contention_ratio <= 0 ? std::string("unchanged: no op ran both overlapped and alone")
      : m.contention_raised   ? std::string("raised to ") + ratio
                              : std::string("kept: ") + ratio + " is a lower bound of the end-to-end factor";
  std::snprintf(buf, sizeof buf,
                "samples from %lld op instances: GEMM %lld new / %lld replaced, kernels %lld / %lld, collective points "
                "%lld / %lld; contention factor %.3f (%s)\n",
                static_cast<long long>(r.instances_used), static_cast<long long>(m.gemms_added),
                static_cast<long long>(m.gemms_replaced), static_cast<long long>(m.kernels_added),
                static_cast<long long>(m.kernels_replaced), static_cast<long long>(m.collective_points_added),
                static_cast<long long>(m.collective_points_replaced),
                r.db.contention_factor, contention_note.c_str());
  out += buf;
  if (r.collectives_polled && m.collective_points_added + m.collective_points_replaced > 0) {
    out += "collectives polled by the host thread (trace comm_progress): DP slices sampled as what they cost the "
           "rank (the gap and the slowdown of the compute inside them), not as their length\n";
  }
  if (!r.db.run_factors.empty()) {
    out += "run factors (in-run / calibrated time, applied to shapes no trace sampled):";
    for (const auto& f : r.db.run_factors) {
      std::snprintf(buf, sizeof buf, " %s %.3f", RunFactorName(f).c_str(), f.factor);
      out += buf;
    }
    out += "\n";
  }
  if (r.run_op_times.measured()) {
    std::snprintf(buf, sizeof buf,
                  "op times in the run: mean %.3f x median over %lld instances (samples are medians; a compute op "
                  "is charged (ratio - 1) x its time instead of the calibrated noise's mean excess)\n",
                  r.run_op_times.mean_over_median, static_cast<long long>(r.run_op_times.instances));
    out += buf;
    if (RunDisturbed(r.run_op_times)) {
      std::snprintf(buf, sizeof buf,
                    "warning: the run was disturbed (op times %.2fx their medians on average, above %.2f: another "
                    "process, throttling, a slower minute); that charge now applies to every compute op this "
                    "database predicts: refine again on a trace of a quiet run\n",
                    r.run_op_times.mean_over_median, kDisturbedRunRatio);
      out += buf;
    }
  }
  if (r.op_gap.applied()) {
    std::snprintf(buf, sizeof buf,
                  "host gap between ops: %.2f us on average over %lld consecutive compute ops of a micro-batch "
                  "(the device idles meanwhile); charged to every compute op\n",
                  r.op_gap.mean_s * 1e6, static_cast<long long>(r.op_gap.pairs));
    out += buf;
  }
  for (const auto& [why, n] : r.not_sampled) {
    std::snprintf(buf, sizeof buf, "  not sampled: %lld x %s\n", static_cast<long long>(n), why.c_str());
    out += buf;
  }
  return out;
}

}  // namespace parallax::profiler
