// The attribution part of `parallax refine`'s report on a foreign trace (op_assignment.h).
#include <cstdio>

#include "profiler/foreign/op_assignment.h"

namespace parallax::profiler {

//! How the profiler's overhead is estimated and removed, as the report and docs/profiler.md state it.
constexpr const char* kOverheadMethod =
    "per recorded host event: the mean, over ops that only forward to one nested op (aten::t -> "
    "aten::transpose, aten::reshape -> view, ...), of the parent's time less the child's; removed from "
    "each op's work per event nested in it and from the timeline per event recorded before it";

Json ForeignReportToJson(const ForeignReport& r) {
  Json fam = Json::array();
  for (const auto& f : r.families) {
    fam.push_back({{"family", f.family}, {"time_s", f.time_s}, {"attributed_s", f.attributed_s}, {"units", f.units},
                   {"share_of_step", r.step_s > 0 ? f.attributed_s / r.step_s : 0}});
  }
  Json un = Json::array();
  for (const auto& u : r.unattributed) {
    un.push_back({{"name", u.name}, {"time_s", u.time_s}, {"count", u.count}, {"share_of_step", u.share_of_step}});
  }
  Json overhead{{"per_event_us", r.overhead_per_event_s * 1e6}, {"pairs", r.overhead_pairs},
                {"recorded_events", r.recorded_events}, {"removed_s", r.overhead_removed_s},
                {"method", r.units == "host ops" ? kOverheadMethod : "none: device kernels are timed on the device"}};
  return {{"implementation", r.implementation}, {"form", r.form}, {"units", r.units}, {"rank", r.rank},
          {"steps", r.steps}, {"step_s", r.step_s}, {"attributed_s", r.attributed_s},
          {"share_explained", r.step_s > 0 ? r.attributed_s / r.step_s : 0}, {"glue_s", r.glue_s},
          {"unit_count", r.unit_count}, {"units_assigned", r.assigned}, {"ops_matched", r.ops_matched},
          {"plan_ops", r.plan_ops}, {"ops_out_of_line", r.ops_out_of_line}, {"attention", r.attention}, {"families", fam},
          {"unattributed", un}, {"profiler_overhead", overhead}};
}

std::string FormatForeignReport(const ForeignReport& r) {
  std::string out;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s trace (%s form, %s, rank %lld, %lld step(s)): step %.3f ms, %.1f%% of it attributed to %lld plan ops "
                "(%lld of %lld units; %lld ops out of line); attention from the trace: %s\n",
                r.implementation.c_str(), r.form.c_str(), r.units.c_str(), static_cast<long long>(r.rank),
                static_cast<long long>(r.steps), r.step_s * 1e3,
                r.step_s > 0 ? 100 * r.attributed_s / r.step_s : 0.0, static_cast<long long>(r.ops_matched),
                static_cast<long long>(r.assigned), static_cast<long long>(r.unit_count),
                static_cast<long long>(r.ops_out_of_line), r.attention.empty() ? "none seen" : r.attention.c_str());
  out += buf;
  std::snprintf(buf, sizeof buf, "%-12s %12s %12s %8s\n", "family", "time", "attributed", "of step");
  out += buf;
  for (const auto& f : r.families) {
    std::snprintf(buf, sizeof buf, "%-12s %9.3f ms %9.3f ms %7.1f%%\n", f.family.c_str(), f.time_s * 1e3,
                  f.attributed_s * 1e3, r.step_s > 0 ? 100 * f.attributed_s / r.step_s : 0.0);
    out += buf;
  }
  size_t shown = 0;
  for (const auto& u : r.unattributed) {
    if (shown++ == 8) break;
    std::snprintf(buf, sizeof buf, "unattributed %.3f ms (%.2f%% of step) x%lld: %.160s\n", u.time_s * 1e3,
                  100 * u.share_of_step, static_cast<long long>(u.count), u.name.c_str());
    out += buf;
  }
  if (r.units == "host ops") {
    std::snprintf(buf, sizeof buf,
                  "profiler overhead: %.2f us per recorded event (mean of %lld forwarding pairs) x %lld events: "
                  "%.3f ms removed from the step\n",
                  r.overhead_per_event_s * 1e6, static_cast<long long>(r.overhead_pairs),
                  static_cast<long long>(r.recorded_events), r.overhead_removed_s * 1e3);
    out += buf;
  }
  return out;
}

}  // namespace parallax::profiler
