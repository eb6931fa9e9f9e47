#include "profiler/foreign/foreign_refine.h"

#include <utility>

#include "planner/sim/simulator.h"

namespace parallax::profiler {
namespace {

//! "flash" when the trace ran a fused attention (a flash / fmha / SDPA kernel or op), "unfused"
//! when its attention was separate matmuls and softmax, "" when it has no attention unit.
std::string AttentionFromTrace(const KinetoEvents& ev, const Attribution& a) {
  std::string seen;
  for (const AttributedUnit& u : a.units) {
    if (FamilyOf(u) != "attention") continue;
    const std::string& n = ev.events[u.event].name;
    for (const char* p : {"*flash*", "*fmha*", "*scaled_dot_product*", "*sdpa*", "*ScaledDotProduct*"}) {
      if (PatternMatches(p, n)) return "flash";
    }
    seen = "unfused";
  }
  return seen;
}

}  // namespace

Result<ForeignRefineResult> RefineForeign(const Plan& plan_in, const std::string& trace_file, const CostDb& db) {
  PX_ASSIGN(const AttributionTable* table, AttributionTableFor(plan_in.implementation.name));
  PX_ASSIGN(auto ev, ReadKinetoEvents(trace_file));
  const Attribution a = Attribute(ev, *table);
  Plan plan = plan_in;
  const std::string attention = AttentionFromTrace(ev, a);
  if (!attention.empty()) {
    plan.implementation.attention = {attention == "flash" ? AttentionKernel::kFlash : AttentionKernel::kUnfused,
                                     trace_file + ": the attention kernels the trace ran"};
  }
  planner::SimOptions so;
  so.record_trace = true;
  so.all_ranks = true;
  PX_ASSIGN(auto sim, planner::Simulate(plan, &db, so));
  const int64_t rank = ev.rank >= 0 ? ev.rank : 0;
  PX_ASSIGN(auto assigned, AssignToPlan(ev, a, *sim.trace, rank, trace_file));
  assigned.report.implementation = table->implementation;
  assigned.report.attention = attention;
  PX_ASSIGN(auto refined, Refine(plan, assigned.measured, trace_file, db));
  return ForeignRefineResult{std::move(refined), std::move(assigned.report), std::move(assigned.attributed)};
}

Json ForeignRefineToJson(const ForeignRefineResult& r) {
  Json j = RefineToJson(r.refine);
  j["attribution"] = ForeignReportToJson(r.attribution);
  return j;
}

std::string FormatForeignRefine(const ForeignRefineResult& r) {
  return FormatForeignReport(r.attribution) + FormatRefine(r.refine);
}

}  // namespace parallax::profiler
