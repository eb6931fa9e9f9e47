#include "profiler/refine/sample_fit.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "model/step_time.h"
#include "profiler/calibrate/measurement.h"

namespace parallax::profiler {
namespace {

struct Group {
  planner::OpDescription desc;
  std::vector<double> alone;
  std::vector<double> overlapped;
  //! Collectives: converted once k is known (alone/overlapped stay empty). Compute ops: every
  //! instance, for the per-step sums (MedianStepOverMedians).
  std::vector<const OpInstance*> instances;
};

std::string KeyOf(const OpInstance& in, const planner::OpDescription& d) {
  if (d.collective) {
    const auto& c = *d.collective;
    return std::string("coll/") + ToString(c.kind) + "/" + std::to_string(c.bytes) + "/" + std::to_string(c.group.size) +
           (c.group.spans_nodes() ? "/inter" : "/intra");
  }
  return ComputeGroupKey(in.id, in.predicted_bytes);
}

//! An estimate of one shape's time from one op group (several groups may share a shape).
struct Estimate {
  double time_s = 0;
  double spread_s = 0;
  int64_t repetitions = 0;
};

Measurement Pool(const std::vector<Estimate>& est) {
  std::vector<double> t, s;
  int64_t reps = 0;
  for (const auto& e : est) {
    t.push_back(e.time_s);
    s.push_back(e.spread_s);
    reps += e.repetitions;
  }
  std::sort(t.begin(), t.end());
  std::sort(s.begin(), s.end());
  Measurement m;
  m.median_s = Quantile(t, 0.5);
  m.spread_s = Quantile(s, 0.5);
  m.repetitions = reps;
  return m;
}

//! Per family: measured and predicted seconds over the op instances that priced it, and how many
//! op descriptions those were.
struct FamilyTotals {
  double measured_s = 0, predicted_s = 0;
  int64_t ops = 0;
};

//! What the compute groups measured, before pooling across groups.
struct ComputeEstimates {
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, std::vector<Estimate>> gemms;
  std::map<std::pair<std::string, int64_t>, std::vector<Estimate>> kernels;
  std::map<std::string, FamilyTotals> families;
  std::vector<double> ratios;  //!< overlapped / alone medians of the groups that have both
};

//! The instances by op description (KeyOf); those not turned into samples are counted in
//! `out.not_sampled`, the others in `out.instances_used`. Groups point into `instances`.
std::map<std::string, Group> GroupInstances(const planner::PricedOps& priced, const std::vector<OpInstance>& instances,
                                            FittedSamples& out) {
  std::map<std::string, Group> groups;
  for (const OpInstance& in : instances) {
    planner::OpDescription d = priced.Describe(in.id, in.predicted_bytes);
    if (!d.not_sampled.empty()) {
      ++out.not_sampled[std::string(ToString(in.id.op)) + ": " + d.not_sampled];
      continue;
    }
    if (in.measured_s <= 0) {
      ++out.not_sampled["zero-length measured slices"];
      continue;
    }
    ++out.instances_used;
    auto [it, created] = groups.try_emplace(KeyOf(in, d));
    Group& g = it->second;
    if (created) g.desc = std::move(d);
    g.instances.push_back(&in);
    if (!g.desc.collective) (in.overlapped ? g.overlapped : g.alone).push_back(in.measured_s);
  }
  return groups;
}

//! A compute group's measured pace: the median of the instances that ran alone, else of the
//! overlapped ones.
Measurement Pace(const Group& g) { return Summarize(g.alone.empty() ? g.overlapped : g.alone); }

//! The smallest median per kernel call over the compute groups that know their kernel count.
std::optional<LaunchBound> MeasureLaunchBound(const std::map<std::string, Group>& groups) {
  std::optional<LaunchBound> bound;
  for (const auto& [key, g] : groups) {
    if (!g.desc.compute || g.desc.compute->kernels <= 0) continue;
    const double per_kernel = Pace(g).median_s / static_cast<double>(g.desc.compute->kernels);
    if (per_kernel > 0 && (!bound || per_kernel < bound->per_kernel_s)) {
      bound = LaunchBound{per_kernel, key, g.desc.compute->kernels};
    }
  }
  return bound;
}

//! Each compute group's median (Pace) shared among its GEMMs and memory-bound parts in proportion
//! to their predicted times, against the op's time with the launch floor the refined database will
//! hold (`launch_s` per kernel): an op that floor covers was host-bound, its parts ran faster than
//! its median. Sets `out.run_op_times` and the contention sample count.
ComputeEstimates EstimateCompute(const std::map<std::string, Group>& groups, double launch_s, FittedSamples& out) {
  ComputeEstimates est;
  double run_total_s = 0, run_median_s = 0;
  std::map<int64_t, std::pair<double, double>> by_step;  // step -> (measured, medians) of its instances
  for (const auto& [key, g] : groups) {
    if (g.desc.collective) continue;  // AddCollectiveSamples, once the contention factor is known
    const Measurement alone = Summarize(g.alone);
    const Measurement over = Summarize(g.overlapped);
    if (!g.alone.empty() && !g.overlapped.empty()) {
      est.ratios.push_back(over.median_s / alone.median_s);
      out.contention.samples += static_cast<int64_t>(g.overlapped.size());
    }
    const Measurement m = g.alone.empty() ? over : alone;
    const planner::ComputeDescription& c = *g.desc.compute;
    if (c.time_s <= 0) continue;
    const double priced_s = std::max(c.time_s, static_cast<double>(c.kernels) * launch_s);
    const auto count = static_cast<double>(g.alone.empty() ? g.overlapped.size() : g.alone.size());
    for (double t : g.alone.empty() ? g.overlapped : g.alone) run_total_s += t;
    run_median_s += m.median_s * count;
    for (const OpInstance* in : g.instances) {
      if (in->overlapped != g.alone.empty()) continue;  // not among the instances m is the median of
      by_step[in->measured_step].first += in->measured_s;
      by_step[in->measured_step].second += m.median_s;
    }
    out.run_op_times.instances += static_cast<int64_t>(count);
    auto add_family = [&](const std::string& family, double share, double predicted_s) {
      FamilyTotals& t = est.families[family];
      t.measured_s += m.median_s * share * count;
      t.predicted_s += predicted_s * count;
      ++t.ops;
    };
    for (const auto& part : c.gemms) {
      const double share = part.time_s / priced_s;
      est.gemms[{part.m, part.n, part.k, part.batch, part.accumulate}].push_back(
          {m.median_s * share, m.spread_s * share, m.repetitions});
      add_family("gemm", share, part.time_s);
    }
    for (const auto& part : c.memory) {
      const double share = part.time_s / priced_s;
      est.kernels[{part.family, part.bytes}].push_back({m.median_s * share, m.spread_s * share, m.repetitions});
      add_family(part.family, share, part.time_s);
    }
  }
  if (run_median_s > 0) {
    out.run_op_times.mean_over_median = run_total_s / run_median_s;
    out.run_op_times.source = "refine";
  }
  std::vector<double> step_ratios;
  for (const auto& [step, sums] : by_step) {
    if (sums.second > 0) step_ratios.push_back(sums.first / sums.second);
  }
  out.median_step_over_medians = Median(std::move(step_ratios));
  return est;
}

//! One GEMM sample per shape and one kernel sample per (family, bytes), pooled over the groups
//! that ran it.
void AddPooledSamples(const ComputeEstimates& est, DType dtype, FittedSamples& out) {
  for (const auto& [shape, e] : est.gemms) {
    const Measurement m = Pool(e);
    GemmSample s;
    std::tie(s.m, s.n, s.k, s.batch, s.accumulate) = shape;
    s.dtype = dtype;
    s.time_s = m.median_s;
    s.stats = m.stats();
    s.source = "refine";
    out.gemms.push_back(s);
  }
  for (const auto& [key, e] : est.kernels) {
    const Measurement m = Pool(e);
    out.kernels.push_back({key.first, key.second, m.median_s, m.stats(), "refine"});
  }
}

//! Per family its measured over predicted total, and the memory-bound families pooled: what a
//! family the trace did not time takes (the grad-norm read, whose slice also waits in the world
//! all-reduce; a family only another layout runs).
void AddRunRatios(const std::map<std::string, FamilyTotals>& families, DType dtype, FittedSamples& out) {
  FamilyTotals streaming;
  for (const auto& [family, t] : families) {
    if (t.measured_s <= 0 || t.predicted_s <= 0) continue;
    out.run_ratios.push_back({family, dtype, t.measured_s / t.predicted_s, t.ops, "refine"});
    if (family == "gemm") continue;
    streaming.measured_s += t.measured_s;
    streaming.predicted_s += t.predicted_s;
    streaming.ops += t.ops;
  }
  if (streaming.measured_s > 0 && streaming.predicted_s > 0) {
    out.run_ratios.push_back({kMemoryBoundRunFactor, dtype, streaming.measured_s / streaming.predicted_s,
                              streaming.ops, "refine"});
  }
}

//! The contention factor from the overlapped / alone ratios: their median (at least 1), with
//! their interquartile range as the spread. Nothing without ratios.
void FitContention(std::vector<double> ratios, FittedSamples& out) {
  if (ratios.empty()) return;
  std::sort(ratios.begin(), ratios.end());
  out.contention_factor = std::max(1.0, Quantile(ratios, 0.5));
  out.contention.source = "refine";
  out.contention.spread = Quantile(ratios, 0.75) - Quantile(ratios, 0.25);
}

//! One collective point per collective group: the median of what its instances cost
//! (WindowedCollectiveTime with contention `k` where the window is known, else their length).
void AddCollectiveSamples(const std::map<std::string, Group>& groups, double k, FittedSamples& out) {
  for (const auto& [key, g] : groups) {
    if (!g.desc.collective) continue;
    std::vector<double> times;
    times.reserve(g.instances.size());
    for (const OpInstance* in : g.instances) {
      times.push_back(in->window_compute_alone_s < 0 ? in->measured_s
                                                      : WindowedCollectiveTime(in->measured_s, in->window_uncovered_s,
                                                                               in->window_compute_alone_s, k));
    }
    const Measurement m = Summarize(times);
    CollectiveSample c;
    c.what = *g.desc.collective;
    c.point.bytes = c.what.bytes;
    c.point.time_s = m.median_s;
    c.point.algbw_GBps = static_cast<double>(c.what.bytes) / m.median_s / 1e9;
    c.point.busbw_GBps =
        c.point.algbw_GBps * planner::CollectiveModel::BusFactor(c.what.kind, std::max<int64_t>(c.what.group.size, 2));
    c.point.stats = m.stats();
    out.collectives.push_back(c);
  }
}

}  // namespace

std::string ComputeGroupKey(const OpIdentity& id, int64_t bytes) {
  std::string k = std::string("op/") + ToString(id.op) + "/" + ToString(id.phase) + (id.layer < 0 ? "/outer" : "/layer");
  if (id.op == OpKind::kOptimizer) k += "/rank" + std::to_string(id.rank);
  if (IsMemoryPass(id.op)) k += "/bytes" + std::to_string(bytes);
  return k;
}

double WindowedCollectiveTime(double window_s, double uncovered_s, double compute_alone_s, double contention) {
  if (contention <= 1.0) return window_s;  // compute hides a covered collective entirely: only W says how long it ran
  const double cost = std::clamp(window_s - compute_alone_s, std::max(0.0, uncovered_s), window_s);
  return std::min(window_s, cost * contention / (contention - 1.0));
}

FittedSamples FitSamples(const planner::PricedOps& priced, const std::vector<OpInstance>& instances, double contention,
                         bool fit_contention) {
  FittedSamples out;
  const std::map<std::string, Group> groups = GroupInstances(priced, instances, out);
  out.launch_bound = MeasureLaunchBound(groups);
  out.launch_s = out.launch_bound ? std::min(priced.launch_overhead_s(), out.launch_bound->per_kernel_s)
                                  : priced.launch_overhead_s();
  ComputeEstimates est = EstimateCompute(groups, out.launch_s, out);
  AddPooledSamples(est, priced.dtype(), out);
  AddRunRatios(est.families, priced.dtype(), out);
  if (fit_contention) FitContention(std::move(est.ratios), out);
  AddCollectiveSamples(groups, std::max(contention, out.contention_factor.value_or(1.0)), out);
  return out;
}

}  // namespace parallax::profiler
