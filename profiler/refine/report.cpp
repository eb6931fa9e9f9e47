// The report of `parallax refine` (declared in refine.h): the --json object and the text.
#include <cstdio>
#include <string>

#include "profiler/refine/refine.h"

namespace parallax::profiler {
namespace {

//! How reports name a run factor: "gemm/bf16" (GEMM factors are per dtype), else the family.
std::string RunFactorName(const RunFactor& f) {
  return f.family == "gemm" ? f.family + "/" + ToString(f.dtype) : f.family;
}

}  // namespace

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
                           {"median_step", r.median_step_op_times},
                           {"instances", r.run_op_times.instances},
                           {"disturbed", RunDisturbed(r.run_op_times)},
                           {"applied", !r.disturbed.refused}};
  }
  if (r.disturbed.refused) {
    out["disturbed"] = {{"refused", {"contention", "run_op_times"}},
                        {"trace_contention", r.disturbed.trace_contention},
                        {"kept_contention_factor", r.db.contention_factor}};
  }
  out["op_gap"] = {{"mean_us", r.op_gap.mean_s * 1e6}, {"pairs", r.op_gap.pairs},
                   {"applied", r.op_gap.applied()}};
  out["launch_overhead"] = {{"in_use_us", r.launch.in_use_us}, {"trace_bound_us", r.launch.bound_us},
                            {"bound_by", r.launch.group}, {"lowered", r.launch.lowered}};
  return out;
}

std::string FormatRefine(const RefineResult& r) {
  std::string out;
  char buf[640];
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
      r.disturbed.refused   ? std::string("kept: the disturbed run's sample was refused, see the warning below")
      : m.contention_ratio <= 0 ? std::string("unchanged: no op ran both overlapped and alone")
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
    if (!r.disturbed.refused) {
      std::snprintf(buf, sizeof buf,
                    "op times in the run: mean %.3f x median over %lld instances, %.3f x in the median step "
                    "(samples are medians; a compute op is charged (the median step's ratio - 1) x its time "
                    "instead of the calibrated noise's mean excess)\n",
                    r.run_op_times.mean_over_median, static_cast<long long>(r.run_op_times.instances),
                    r.median_step_op_times);
      out += buf;
    } else {
      char sample[64] = "none";
      if (r.disturbed.trace_contention > 0) std::snprintf(sample, sizeof sample, "%.3f", r.disturbed.trace_contention);
      std::snprintf(buf, sizeof buf,
                    "warning: the run was disturbed (op times %.2fx their medians on average over %lld instances, "
                    "above %.2f: another process, throttling, a slower minute). Refused: its contention sample (%s) "
                    "and its op-time charge; the database keeps contention %.3f and its own noise. Kept: the per-op "
                    "medians (a median ignores a minority of slowed ops). Refine on a quiet run to update the rest\n",
                    r.run_op_times.mean_over_median, static_cast<long long>(r.run_op_times.instances),
                    kDisturbedRunRatio, sample, r.db.contention_factor);
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
  if (r.launch.lowered) {
    std::snprintf(buf, sizeof buf,
                  "launch floor: %.3f us per kernel call (was %.3f us), what the trace's %s took per kernel; "
                  "each compute op is charged at least kernels x this\n",
                  r.launch.bound_us, r.launch.in_use_us, r.launch.group.c_str());
    out += buf;
  }
  for (const auto& [why, n] : r.not_sampled) {
    std::snprintf(buf, sizeof buf, "  not sampled: %lld x %s\n", static_cast<long long>(n), why.c_str());
    out += buf;
  }
  return out;
}

}  // namespace parallax::profiler
