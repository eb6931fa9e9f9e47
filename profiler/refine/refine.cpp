#include "profiler/refine/refine.h"

#include <algorithm>
#include <utility>

#include "planner/cost/priced_ops.h"
#include "planner/sim/simulator.h"
#include "profiler/refine/dp_windows.h"
#include "profiler/refine/matching.h"
#include "profiler/refine/sample_fit.h"
#include "profiler/refine/trace_contention.h"

namespace parallax::profiler {
namespace {

double Rel(double predicted, double measured) { return measured > 0 ? (predicted - measured) / measured : 0; }

Result<traces::Trace> Predict(const Plan& plan, const CostDb& db) {
  planner::SimOptions so;
  so.record_trace = true;
  so.all_ranks = true;
  PX_ASSIGN(auto sim, planner::Simulate(plan, &db, so));
  return std::move(*sim.trace);
}

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

//! Per op kind, the predicted time before and after refining against the measured, largest
//! measured first.
std::vector<OpFamilyError> FamilyErrors(const traces::TraceDiff& before, const traces::TraceDiff& after) {
  std::vector<OpFamilyError> out;
  const auto fb = ByFamily(before);
  const auto fa = ByFamily(after);
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
    out.push_back(f);
  }
  std::sort(out.begin(), out.end(),
            [](const OpFamilyError& a, const OpFamilyError& b) { return a.measured_s > b.measured_s; });
  return out;
}

//! The instances as samples at the plan's shapes, merged into `r.db` (a copy of `db_in`), with the
//! contention factor the trace shows end to end where it exceeds the instances' own.
void FitAndMerge(const traces::Trace& predicted, const traces::Trace& measured, const traces::Alignment& al,
                 const std::vector<OpInstance>& instances, const CostDb& db_in, RefineResult& r) {
  const planner::PricedOps priced(r.plan, &db_in);
  const std::optional<double> trace_k = TraceContention(predicted, measured, al);
  FittedSamples fitted = FitSamples(priced, instances, std::max(db_in.contention_factor, trace_k.value_or(1.0)));
  r.run_op_times = fitted.run_op_times;
  r.median_step_op_times = fitted.median_step_over_medians;
  if (RunDisturbed(fitted.run_op_times)) {
    // What a disturbance adds to the waits and the op times' tail is not this machine's: refuse
    // both, and read the DP windows with the database's contention alone.
    r.disturbed.refused = true;
    r.disturbed.trace_contention = std::max(trace_k.value_or(0.0), fitted.contention_factor.value_or(0.0));
    fitted = FitSamples(priced, instances, db_in.contention_factor, false);
    fitted.run_op_times = RunOpTimes{};
  } else if (auto k = trace_k; k && (!fitted.contention_factor || *k > *fitted.contention_factor)) {
    fitted.contention_factor = *k;
    fitted.contention.source = "refine";
  }
  r.instances_used = fitted.instances_used;
  r.not_sampled = fitted.not_sampled;
  r.db = db_in;
  r.merged = MergeSamples(fitted, r.db);
  r.contention_refitted = r.merged.contention_raised;
  r.launch = LowerLaunchFloor(fitted, priced.launch_overhead_s(), r.db);
}

}  // namespace

Result<RefineResult> Refine(const Plan& plan_in, const traces::Trace& measured, const std::string& trace_file,
                            const CostDb& db_in) {
  RefineResult r;
  r.plan = plan_in;
  PX_TRY(MatchRecordedPlan(measured, trace_file, r.plan));
  PX_ASSIGN(auto predicted, Predict(r.plan, db_in));
  PX_ASSIGN(auto al, AlignWithPlan(predicted, measured, trace_file, r.plan));
  std::vector<OpInstance> instances = MatchedInstances(predicted, measured, al);
  r.collectives_polled = CollectivesPolled(measured, r.plan);
  if (r.collectives_polled) MeasureDpWindows(measured, al, instances);

  FitAndMerge(predicted, measured, al, instances, db_in, r);
  r.op_gap = MeasureOpGap(measured);
  if (r.op_gap.applied()) r.db.op_gap_us = r.op_gap.mean_s * 1e6;

  r.before = traces::DiffTraces(predicted, measured);
  PX_ASSIGN(auto after, Predict(r.plan, r.db));
  r.after = traces::DiffTraces(after, measured);
  r.families = FamilyErrors(r.before, r.after);
  return r;
}

}  // namespace parallax::profiler
