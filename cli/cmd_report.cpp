// `parallax report --plan P --measured T [--costdb DB] [--refined-costdb DB2] [--candidates C] -o
// report.html`: one self-contained HTML page of a loop that ran: the ranked plans, the predicted and
// measured step times, and the per-op errors before and after refine. Thin: it calls the simulator
// and the trace diff that `simulate` and `trace diff` call, and cli/html_report.h draws the page.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/inputs.h"
#include "cli/html_report.h"
#include "model/load.h"
#include "model/schedule.h"
#include "planner/sim/simulator.h"
#include "traces/chrome_reader.h"
#include "traces/diff.h"

namespace parallax::cli {
namespace {

struct ReportOptions {
  std::string plan, measured, costdb, refined_costdb, candidates, output;
  int64_t top = 5;
};

//! The simulator's prediction of `plan`, with its trace when `trace` is set.
Result<planner::SimResult> SimulatePlan(const Plan& plan, const std::optional<CostDb>& db, bool trace) {
  planner::SimOptions so;
  so.record_trace = trace;
  so.all_ranks = plan.layout.world_size() <= 64;
  return planner::Simulate(plan, db ? &*db : nullptr, so);
}

//! The layout as the report's table columns, in the order of `parallax plan`'s table.
std::vector<std::pair<std::string, std::string>> Dims(const Layout& l) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  std::string schedule = ToString(l.schedule);
  if (l.schedule == ScheduleKind::kInterleaved) schedule += " v=" + n(l.virtual_stages);
  return {{"dp", n(l.dp)},
          {"tp", n(l.tp)},
          {"pp", n(l.pp)},
          {"zero", n(l.zero_stage)},
          {"mb", n(l.micro_batch)},
          {"gb", n(l.global_batch)},
          {"recompute", ToString(l.recompute)},
          {"schedule", schedule},
          {"sp", l.sequence_parallel ? "on" : "off"}};
}

ReportPlanRow RowOf(const Layout& layout, const planner::Prediction& p, bool chosen) {
  return ReportPlanRow{.layout = LayoutToString(layout),
                       .dims = Dims(layout),
                       .step_time_s = p.step_time_s,
                       .tokens_per_s = p.tokens_per_s,
                       .mfu = p.mfu,
                       .peak_memory_bytes = p.peak_memory_bytes,
                       .chosen = chosen};
}

//! The candidates file's `top` fastest feasible layouts (as the search ranked them), each simulated
//! on the plan's model, cluster and implementation, ordered by the simulated step time; the plan's
//! own layout is always a row.
Result<std::vector<ReportPlanRow>> RankedRows(const ReportOptions& o, const Plan& plan, const std::optional<CostDb>& db,
                                              const planner::Prediction& chosen) {
  std::vector<ReportPlanRow> rows{RowOf(plan.layout, chosen, true)};
  if (o.candidates.empty()) return rows;
  auto j = LoadJsonFile(o.candidates);
  if (!j) return j.error();
  if (j->value("kind", "") != "candidates" || !j->contains("candidates") || !(*j)["candidates"].is_array()) {
    return BadInput(o.candidates + ": /kind: expected a candidates file (parallax plan --candidates)");
  }
  const std::string model = j->contains("model") ? (*j)["model"].value("name", "") : "";
  if (model != plan.model.name) {
    return BadInput(o.candidates + ": /model/name: \"" + model + "\", but the plan's model is \"" + plan.model.name + "\"");
  }
  std::vector<std::pair<double, Layout>> feasible;
  const Json& list = (*j)["candidates"];
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& c = list[i];
    if (c.contains("rejected") || !c.contains("step_time_s") || !c.value("fits", false)) continue;
    auto l = LayoutFromJson(c.at("layout"), o.candidates, "/candidates/" + std::to_string(i) + "/layout");
    if (!l) return l.error();
    feasible.emplace_back(c["step_time_s"].get<double>(), *l);
  }
  std::stable_sort(feasible.begin(), feasible.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::string chosen_layout = LayoutToString(plan.layout);
  for (size_t i = 0; i < feasible.size() && static_cast<int64_t>(i) < o.top; ++i) {
    if (LayoutToString(feasible[i].second) == chosen_layout) continue;
    Plan p = plan;
    p.layout = feasible[i].second;
    p.training.global_batch = p.layout.global_batch;
    auto sim = SimulatePlan(p, db, false);
    if (!sim) return sim.error();
    rows.push_back(RowOf(p.layout, sim->prediction, false));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.step_time_s < b.step_time_s; });
  return rows;
}

//! Per op kind and phase, the largest measured first: the error before refine, and after it when
//! there is a refined diff.
std::vector<ReportOpError> OpErrors(const traces::TraceDiff& before, const std::optional<traces::TraceDiff>& after,
                                    size_t top) {
  const double steps = static_cast<double>(std::max<int64_t>(before.steps, 1));
  std::map<std::string, double> refined;
  if (after) {
    for (const auto& o : after->per_op) refined[o.op + " " + o.phase] = o.rel_error;
  }
  std::vector<ReportOpError> out;
  for (const auto& o : before.per_op) {  // sorted by measured time, largest first
    if (out.size() == top) break;
    if (o.measured_ns <= 0) continue;
    ReportOpError e{.op = o.op + " " + o.phase, .measured_s = static_cast<double>(o.measured_ns) * 1e-9 / steps,
                    .error_before = o.rel_error, .error_after = std::nullopt};
    if (auto it = refined.find(e.op); it != refined.end()) e.error_after = it->second;
    out.push_back(e);
  }
  return out;
}

std::string StepsNote(const traces::TraceDiff& d) {
  std::string steps;
  for (int64_t s : d.measured_steps) steps += (steps.empty() ? "" : ",") + std::to_string(s);
  return "Measured: the median (slowest rank's) step span of measured step(s) " + (steps.empty() ? std::string("?") : steps) +
         " (the first step, the warm-up, is left out when there are more), as parallax trace diff reports it. "
         "Predicted: the simulator's step time for the plan (parallax simulate).";
}

std::string Base(const std::string& path) { return std::filesystem::path(path).filename().string(); }

int RunReport(const ReportOptions& o) {
  auto plan = ResolvePlan(o.plan, nullptr, nullptr, TrainingSpec{});
  if (!plan) return ReportError(plan.error(), false);
  if (Status st = ValidateLayout(plan->layout, plan->model, plan->cluster); !st) return ReportError(st.error(), false);
  auto db = LoadCostDbFor(o.costdb, plan->cluster, true);
  if (!db) return ReportError(db.error(), false);
  auto refined_db = LoadCostDbFor(o.refined_costdb, plan->cluster, true);
  if (!refined_db) return ReportError(refined_db.error(), false);
  auto measured = traces::ReadChromeTrace(o.measured);
  if (!measured) return ReportError(measured.error(), false);

  auto predicted = SimulatePlan(*plan, *db, true);
  if (!predicted) return ReportError(predicted.error(), false);
  const traces::TraceDiff before = traces::DiffTraces(*predicted->trace, *measured);
  std::optional<traces::TraceDiff> after;
  std::optional<double> refined_step_s;
  if (*refined_db) {
    auto refined = SimulatePlan(*plan, *refined_db, true);
    if (!refined) return ReportError(refined.error(), false);
    after = traces::DiffTraces(*refined->trace, *measured);
    refined_step_s = refined->prediction.step_time_s;
  }
  if (before.mode != traces::AlignMode::kIdentity || before.matched == 0 || before.measured_step_ns <= 0) {
    return ReportError(BadInput(o.measured + ": no op matches the plan's predicted trace by identity (a trace of "
                                "another plan, or not one of parallax run --trace)"),
                       false);
  }
  auto rows = RankedRows(o, *plan, *db, predicted->prediction);
  if (!rows) return ReportError(rows.error(), false);

  ReportData d;
  d.title = plan->model.name + " on " + std::to_string(plan->cluster.total_gpus()) + " x " + plan->cluster.device.name +
            " (" + plan->cluster.name + ")";
  d.plan_layout = LayoutToString(plan->layout);
  d.ranking_note = o.candidates.empty()
                       ? "Only the plan that ran (give --candidates, from parallax plan --candidates, for the ranking)."
                       : "The " + std::to_string(o.top) + " fastest layouts of " + Base(o.candidates) +
                             " as the search ranked them, each simulated with " +
                             (o.costdb.empty() ? std::string("the device's nominal figures") : Base(o.costdb)) +
                             ", ordered by that step time.";
  d.plans = std::move(*rows);
  d.measured_step_s = static_cast<double>(before.measured_step_ns) * 1e-9;
  d.measured_note = StepsNote(before);
  d.predicted_step_s = predicted->prediction.step_time_s;
  d.refined_step_s = refined_step_s;
  d.ops = OpErrors(before, after, 14);
  d.inputs = {"plan: " + o.plan, "measured trace: " + o.measured};
  if (!o.costdb.empty()) d.inputs.push_back("cost database (calibration): " + o.costdb);
  if (!o.refined_costdb.empty()) d.inputs.push_back("cost database (after refine): " + o.refined_costdb);
  if (!o.candidates.empty()) d.inputs.push_back("candidates: " + o.candidates);
  if (Status st = WriteFileAtomic(o.output, HtmlReport(d)); !st) return ReportError(st.error(), false);
  std::printf("wrote %s\n", o.output.c_str());
  return 0;
}

}  // namespace

void RegisterReportCommand(CLI::App& root, CliState& state) {
  auto o = std::make_shared<ReportOptions>();
  auto* cmd = root.add_subcommand(
      "report", "Write one self-contained HTML page of a plan that ran: ranked plans, step times, per-op errors");
  cmd->add_option("--plan", o->plan, "The plan that ran (plan JSON)")->required();
  cmd->add_option("--measured", o->measured, "Its measured trace (parallax run --trace)")->required();
  cmd->add_option("--costdb", o->costdb, "The cost database the plan was predicted with (parallax calibrate)");
  cmd->add_option("--refined-costdb", o->refined_costdb, "The database refine wrote from this run (parallax refine)");
  cmd->add_option("--candidates", o->candidates, "The search's candidates (parallax plan --candidates)");
  cmd->add_option("--top", o->top, "Ranked plans to show")->capture_default_str()->check(Within(1, 100));
  cmd->add_option("-o,--output", o->output, "The HTML file (written atomically)")->required();
  cmd->footer(
      "\nExample: parallax report --plan plan.json --measured measured.json --costdb costdb.json "
      "--refined-costdb refined.json --candidates cand.json -o report.html");
  cmd->callback([o, &state] { state.exit_code = RunReport(*o); });
}

}  // namespace parallax::cli
