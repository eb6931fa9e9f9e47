// `parallax refine --plan P --trace measured.json --costdb in.json -o out.json [--json]`: fits the
// cost database from a measured trace of plan P (profiler/refine/refine.h) and prints the
// step-time and per-op-family errors before and after. Thin: parse, call, print.
#include <cstdio>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "model/load.h"
#include "profiler/refine/refine.h"
#include "traces/chrome_reader.h"

namespace parallax::cli {
namespace {

struct RefineOptions {
  std::string plan, trace, costdb, output, model, cluster;
  int64_t global_batch = 0;
  bool json = false;
};

int RunRefine(const RefineOptions& o) {
  std::optional<ModelSpec> model;
  std::optional<ClusterSpec> cluster;
  if (!o.model.empty()) {
    auto m = ResolveModel(o.model);
    if (!m) return ReportError(m.error(), o.json);
    model = *m;
  }
  if (!o.cluster.empty()) {
    auto c = ResolveCluster(o.cluster);
    if (!c) return ReportError(c.error(), o.json);
    cluster = *c;
  }
  TrainingSpec training;
  training.global_batch = o.global_batch;
  auto plan = ResolvePlan(o.plan, model ? &*model : nullptr, cluster ? &*cluster : nullptr, training);
  if (!plan) return ReportError(plan.error(), o.json);
  if (Status st = ValidateLayout(plan->layout, plan->model, plan->cluster); !st) return ReportError(st.error(), o.json);
  auto db = LoadCostDbFile(o.costdb);
  if (!db) return ReportError(db.error(), o.json);
  if (db->device != plan->cluster.device.name) {
    return ReportError(BadInput(o.costdb + ": /device: measured on \"" + db->device + "\" but the plan's device is \"" +
                                plan->cluster.device.name + "\""),
                       o.json);
  }
  WarnIfOtherCatalogue(*db, o.costdb);
  auto trace = traces::ReadChromeTrace(o.trace);
  if (!trace) return ReportError(trace.error(), o.json);
  auto r = profiler::Refine(*plan, *trace, o.trace, *db);
  if (!r) return ReportError(r.error(), o.json);
  if (Status st = SaveCostDbFile(o.output, r->db); !st) return ReportError(st.error(), o.json);
  if (o.json) {
    Json j = profiler::RefineToJson(*r);
    j["costdb"] = o.output;
    PrintJson(j);
  } else {
    std::printf("%swrote %s\n", profiler::FormatRefine(*r).c_str(), o.output.c_str());
  }
  return 0;
}

}  // namespace

void RegisterRefineCommand(CLI::App& root, CliState& state) {
  auto o = std::make_shared<RefineOptions>();
  auto* cmd = root.add_subcommand("refine", "Fit the cost database from a measured trace of a plan");
  cmd->add_option("--plan", o->plan, "The plan the trace ran: plan JSON or inline dp=..,tp=..,pp=..")->required();
  cmd->add_option("--trace", o->trace, "Measured trace (parallax run --trace)")->required();
  cmd->add_option("--costdb", o->costdb, "Cost database to refine")->required();
  cmd->add_option("-o,--output", o->output, "Refined cost database (written atomically)")->required();
  cmd->add_option("--model", o->model, "Model preset or JSON (inline plan)");
  cmd->add_option("--cluster", o->cluster, "Cluster preset or JSON (inline plan)");
  cmd->add_option("--global-batch", o->global_batch, "Sequences per step (inline plan)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &state] { state.exit_code = RunRefine(*o); });
}

}  // namespace parallax::cli
