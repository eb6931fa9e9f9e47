// `parallax plan`: search the fastest layout that fits; `parallax simulate`: predict one layout's
// step time, memory and trace. Thin: parse, call the planner, print.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/format.h"
#include "model/load.h"
#include "planner/estimate/step_estimate.h"
#include "planner/export/deepspeed.h"
#include "planner/export/megatron.h"
#include "planner/memory/memory_model.h"
#include "planner/search/search.h"
#include "planner/sim/simulator.h"
#include "traces/chrome_writer.h"

namespace parallax::cli {
namespace {

//! What `simulate` says beside a prediction of a layout outside what it searches: a TP group across
//! nodes, a ZeRO stage the plan's implementation does not run (its max_zero_stage fact).
std::vector<std::string> SimulateNotes(const Plan& plan) {
  std::vector<std::string> notes;
  if (TpSpansNodes(plan.layout, plan.cluster)) {
    notes.push_back("tp=" + std::to_string(plan.layout.tp) + " spans " +
                    std::to_string(plan.layout.tp / plan.cluster.gpus_per_node) +
                    " nodes: TP collectives are costed over the inter-node links");
  }
  const int64_t max = MaxZeroStage(plan.implementation, plan.layout.pp);
  if (plan.layout.zero_stage > max && plan.layout.dp > 1) {
    notes.push_back("zero=" + std::to_string(plan.layout.zero_stage) + " is beyond what " + plan.implementation.name +
                    " runs (ZeRO stages up to " + std::to_string(max) +
                    (plan.layout.pp > 1 ? " with pipeline parallelism" : "") + "): predicted as if it ran it");
  }
  return notes;
}

struct CommonOptions {
  std::string model, cluster, costdb;
  int64_t nodes = 0;
  int64_t global_batch = 0;
  std::string precision = "bf16";
  std::string implementation;  //!< profile preset or JSON file; empty: the plan's / parallax
  bool json = false;
};

struct PlanOptions : CommonOptions {
  int64_t top = 5;
  std::string fix, output, export_kind, candidates;
  int threads = 0;
};

struct SimulateOptions : CommonOptions {
  std::string plan, trace;
  bool all_ranks = false;
};

void AddCommon(CLI::App* cmd, CommonOptions& o, bool model_required) {
  auto* m = cmd->add_option("--model", o.model, "Model preset, model JSON or Hugging Face config.json");
  auto* c = cmd->add_option("--cluster", o.cluster, "Cluster preset or cluster JSON");
  if (model_required) {
    m->required();
    c->required();
  }
  cmd->add_option("--nodes", o.nodes, "Node count for a preset cluster")->check(CLI::PositiveNumber);
  cmd->add_option("--global-batch", o.global_batch, "Sequences per step (default: searched / from the plan)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--precision", o.precision, "Training precision")->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  cmd->add_option("--costdb", o.costdb, "Measured costs (parallax calibrate / nccl-tests import)");
  cmd->add_option("--implementation", o.implementation,
                  "What runs the plan: parallax, megatron-core, megatron-2021, megatron-2022, deepspeed, or a profile JSON");
  cmd->add_flag("--json", o.json, "Print one JSON object");
}

//! `plan --candidates FILE`: every evaluated layout with its prediction or its rejection reason
//! (docs/gui.md "Candidates file"; the GUI's plan explorer reads it).
Status WriteCandidates(const std::string& path, const ModelSpec& model, const ClusterSpec& cluster,
                       const TrainingSpec& training, const planner::SearchResult& r) {
  Json list = Json::array();
  for (const auto& c : r.candidates) {
    Json e = c.prediction ? planner::PlanEntryJson(c.layout, *c.prediction) : Json{{"layout", LayoutToJson(c.layout)}};
    if (!c.rejected.empty()) e["rejected"] = c.rejected;
    if (c.peak_memory_bytes > 0) e["peak_memory_bytes"] = c.peak_memory_bytes;
    list.push_back(std::move(e));
  }
  return WriteJsonAtomic(path, Json{{"kind", "candidates"}, {"version", 1}, {"model", ModelToJson(model)},
                                    {"cluster", ClusterToJson(cluster)}, {"training", TrainingToJson(training)},
                                    {"device_memory_bytes", cluster.device.memory_bytes()},
                                    {"searched", r.searched}, {"candidates", std::move(list)}});
}

//! Loads measured costs; they must belong to the cluster's device (A100 timings say nothing of an H100).
Result<std::optional<CostDb>> LoadDb(const std::string& path, const ClusterSpec& cluster) {
  if (path.empty()) return std::optional<CostDb>{};
  auto db = LoadCostDbFile(path);
  if (!db) return db.error();
  if (db->device != cluster.device.name) {
    return BadInput(path + ": /device: measured on \"" + db->device + "\" but the cluster's device is \"" +
                    cluster.device.name + "\"");
  }
  WarnIfOtherCatalogue(*db, path);
  return std::optional<CostDb>{*db};
}

Precision PrecisionOf(const std::string& s) {
  return s == "fp16" ? Precision::kFp16 : s == "fp32" ? Precision::kFp32 : Precision::kBf16;
}

void PrintBreakdownRow(int rank, const Layout& l, const planner::Prediction& p) {
  std::printf("%3d  dp=%-3lld tp=%-2lld pp=%-3lld zero=%lld mb=%-2lld gb=%-5lld %-9s %-11s v=%-2lld sp=%d  %9s %10s %7.1f %5.1f%% %10s\n",
              rank, (long long)l.dp, (long long)l.tp, (long long)l.pp, (long long)l.zero_stage, (long long)l.micro_batch,
              (long long)l.global_batch, ToString(l.recompute), ToString(l.schedule), (long long)l.virtual_stages,
              l.sequence_parallel ? 1 : 0, HumanSeconds(p.step_time_s).c_str(), HumanCount(p.tokens_per_s).c_str(),
              p.model_tflops_per_gpu, p.mfu * 100, HumanBytes(p.peak_memory_bytes).c_str());
}

void PrintPrediction(const planner::Prediction& p) {
  const auto& b = p.breakdown;
  std::printf("step time        %s (%s tokens/s)\n", HumanSeconds(p.step_time_s).c_str(), HumanCount(p.tokens_per_s).c_str());
  std::printf("model TFLOP/s    %.1f per GPU (MFU %.1f%%), hardware %.1f incl. recompute\n", p.model_tflops_per_gpu,
              p.mfu * 100, p.hardware_tflops_per_gpu);
  std::printf("peak memory      %s per GPU%s\n", HumanBytes(p.peak_memory_bytes).c_str(), p.fits ? "" : "  (DOES NOT FIT)");
  std::printf("breakdown        compute %s, TP comm %s, DP comm %s, PP comm %s, bubble %s\n",
              HumanSeconds(b.compute_s).c_str(), HumanSeconds(b.tp_comm_s).c_str(), HumanSeconds(b.dp_comm_s).c_str(),
              HumanSeconds(b.pp_comm_s).c_str(), HumanSeconds(b.bubble_s).c_str());
}

int RunPlan(const PlanOptions& o) {
  auto model = ResolveModel(o.model);
  if (!model) return ReportError(model.error(), o.json);
  auto cluster = ResolveCluster(o.cluster, o.nodes);
  if (!cluster) return ReportError(cluster.error(), o.json);
  auto db = LoadDb(o.costdb, *cluster);
  if (!db) return ReportError(db.error(), o.json);
  auto fix = planner::ParseConstraints(o.fix);
  if (!fix) return ReportError(fix.error(), o.json);
  if (o.export_kind != "" && o.export_kind != "megatron" && o.export_kind != "deepspeed") {
    return ReportError(BadInput("--export: expected megatron or deepspeed, got \"" + o.export_kind + "\""), o.json);
  }
  TrainingSpec training;
  training.precision = PrecisionOf(o.precision);
  training.global_batch = o.global_batch;
  planner::SearchOptions so;
  so.top_k = std::max<int64_t>(o.top, 1);
  so.threads = o.threads;
  so.fix = *fix;
  so.db = *db ? &**db : nullptr;
  auto impl = ResolveImplementation(o.implementation);
  if (!impl) return ReportError(impl.error(), o.json);
  so.implementation = *impl;
  so.record_candidates = !o.candidates.empty();
  so.progress = [](int64_t done, int64_t total) {
    if (total >= 200000) std::fprintf(stderr, "\rparallax plan: %lld / %lld layouts", (long long)done, (long long)total);
    if (total >= 200000 && done == total) std::fprintf(stderr, "\n");
  };
  auto r = planner::Search(*model, *cluster, training, so);
  if (!r) return ReportError(r.error(), o.json);
  if (!o.candidates.empty()) {
    if (Status st = WriteCandidates(o.candidates, *model, *cluster, training, *r); !st) {
      return ReportError(st.error(), o.json);
    }
  }
  if (r->plans.empty()) {
    std::string why = "no layout of " + model->name + " fits on " + std::to_string(cluster->total_gpus()) + " x " +
                      cluster->device.name;
    if (r->smallest_shortfall_bytes > 0) {
      why += ": the closest (" + LayoutToString(r->smallest_shortfall_layout) + ") needs " +
             HumanBytes(r->smallest_shortfall_bytes) + " more per GPU";
    } else {
      why += " (no valid layout: see the rejected counts)";
    }
    return ReportError(Error{why, ErrorKind::kInfeasible}, o.json);
  }
  Plan best;
  best.model = *model;
  best.cluster = *cluster;
  best.training = training;
  best.implementation = *impl;
  best.layout = r->plans.front().layout;
  best.training.global_batch = best.layout.global_batch;
  best.prediction = planner::PredictionToJson(r->plans.front().prediction);
  if (!o.output.empty()) {
    if (Status st = SavePlanFile(o.output, best); !st) return ReportError(st.error(), o.json);
  }
  if (o.export_kind == "megatron") {
    const auto args = planner::ExportMegatron(best);
    for (const auto& w : args.warnings) std::fprintf(stderr, "parallax plan: megatron export: %s\n", w.c_str());
    if (o.json) {
      PrintJson(Json{{"megatron_args", args.args}, {"warnings", args.warnings}, {"implementation", impl->name}});
    } else {
      std::printf("# predicted with implementation profile %s\n%s\n", impl->name.c_str(), args.CommandLine().c_str());
    }
    return 0;
  }
  if (o.export_kind == "deepspeed") {
    Json ds = planner::ExportDeepSpeed(best);
    ds["parallax_implementation"] = impl->name;  // the profile the prediction used
    PrintJson(ds);
    return 0;
  }
  if (o.json) {
    Json plans = Json::array();
    for (const auto& p : r->plans) plans.push_back(planner::PlanEntryJson(p.layout, p.prediction));
    Json rejected = Json::object();
    for (const auto& [k, v] : r->rejected) rejected[k] = v;
    PrintJson(Json{{"plans", plans}, {"rejected", rejected}, {"searched", r->searched}, {"search_time_s", r->search_time_s}});
    return 0;
  }
  std::printf("%s on %lld x %s (%s), %lld layouts searched in %s\n\n", model->name.c_str(),
              (long long)cluster->total_gpus(), cluster->device.name.c_str(), cluster->name.c_str(),
              (long long)r->searched, HumanSeconds(r->search_time_s).c_str());
  std::printf("%3s  %-66s  %9s %10s %7s %6s %10s\n", "#", "layout", "step", "tokens/s", "TFLOP/s", "MFU", "memory");
  int i = 1;
  for (const auto& p : r->plans) PrintBreakdownRow(i++, p.layout, p.prediction);
  std::printf("\nbest: ");
  PrintPrediction(r->plans.front().prediction);
  std::printf("\nrejected:");
  for (const auto& [k, v] : r->rejected) std::printf(" %s %lld;", k.c_str(), (long long)v);
  std::printf("\n");
  if (!o.output.empty()) std::printf("wrote %s\n", o.output.c_str());
  return 0;
}

int RunSimulate(const SimulateOptions& o) {
  std::optional<ModelSpec> model;
  std::optional<ClusterSpec> cluster;
  if (!o.model.empty()) {
    auto m = ResolveModel(o.model);
    if (!m) return ReportError(m.error(), o.json);
    model = *m;
  }
  if (!o.cluster.empty()) {
    auto c = ResolveCluster(o.cluster, o.nodes);
    if (!c) return ReportError(c.error(), o.json);
    cluster = *c;
  }
  TrainingSpec training;
  training.precision = PrecisionOf(o.precision);
  training.global_batch = o.global_batch;
  auto plan = ResolvePlan(o.plan, model ? &*model : nullptr, cluster ? &*cluster : nullptr, training);
  if (!plan) return ReportError(plan.error(), o.json);
  if (!o.implementation.empty()) {
    auto impl = ResolveImplementation(o.implementation);
    if (!impl) return ReportError(impl.error(), o.json);
    plan->implementation = *impl;
  }
  if (Status st = ValidateLayout(plan->layout, plan->model, plan->cluster); !st) return ReportError(st.error(), o.json);
  auto db = LoadDb(o.costdb, plan->cluster);
  if (!db) return ReportError(db.error(), o.json);
  planner::SimOptions so;
  so.record_trace = !o.trace.empty();
  so.all_ranks = o.all_ranks || plan->layout.world_size() <= 64;
  auto sim = planner::Simulate(*plan, *db ? &**db : nullptr, so);
  if (!sim) return ReportError(sim.error(), o.json);
  if (sim->trace) {
    if (Status st = traces::WriteChromeTrace(*sim->trace, o.trace); !st) return ReportError(st.error(), o.json);
  }
  const auto& p = sim->prediction;
  if (o.json) {
    Json j = planner::PlanEntryJson(plan->layout, p);
    Json mem = Json::array();
    for (int64_t r = 0; r < plan->layout.pp; ++r) {
      const auto b = planner::EstimateRankMemory(*plan, r);
      mem.push_back({{"pp_rank", r}, {"weights", b.weights}, {"gradients", b.gradients}, {"optimizer", b.optimizer},
                     {"activations", b.activations}, {"workspace", b.workspace}, {"reserve", b.reserve},
                     {"total", b.total}});
    }
    j["memory_per_pp_rank"] = mem;
    j["implementation"] = plan->implementation.name;
    if (auto notes = SimulateNotes(*plan); !notes.empty()) j["notes"] = notes;
    j["events"] = sim->events;
    if (!o.trace.empty()) j["trace"] = o.trace;
    PrintJson(j);
    return 0;
  }
  std::printf("%s on %lld x %s: %s\n", plan->model.name.c_str(), (long long)plan->cluster.total_gpus(),
              plan->cluster.device.name.c_str(), LayoutToString(plan->layout).c_str());
  PrintPrediction(p);
  std::printf("implementation   %s\n", plan->implementation.name.c_str());
  for (const std::string& n : SimulateNotes(*plan)) std::printf("note             %s\n", n.c_str());
  for (int64_t r = 0; r < plan->layout.pp; ++r) {
    const auto b = planner::EstimateRankMemory(*plan, r);
    std::printf("  pp rank %-4lld weights %s, grads %s, optimizer %s, activations %s, workspace %s, total %s\n",
                (long long)r, HumanBytes(b.weights).c_str(), HumanBytes(b.gradients).c_str(),
                HumanBytes(b.optimizer).c_str(), HumanBytes(b.activations).c_str(), HumanBytes(b.workspace).c_str(),
                HumanBytes(b.total).c_str());
    if (r == 3 && plan->layout.pp > 6) {
      std::printf("  ... (%lld more pipeline ranks)\n", (long long)(plan->layout.pp - 4));
      break;
    }
  }
  if (!o.trace.empty()) std::printf("wrote %s (%lld events simulated)\n", o.trace.c_str(), (long long)sim->events);
  return 0;
}

}  // namespace

void RegisterPlanCommands(CLI::App& root, CliState& state) {
  auto po = std::make_shared<PlanOptions>();
  auto* plan = root.add_subcommand("plan", "Search the fastest layout that fits");
  AddCommon(plan, *po, true);
  plan->add_option("--top", po->top, "How many plans to list")->capture_default_str()->check(CLI::PositiveNumber);
  plan->add_option("--fix", po->fix, "Pin dimensions: k=v,... (dp, tp, pp, zero, micro_batch, global_batch, "
                                      "recompute, schedule, virtual_stages, sequence_parallel)");
  plan->add_option("-o,--output", po->output, "Write the best plan (self-contained JSON)");
  plan->add_option("--export", po->export_kind, "Print the best plan as Megatron-LM arguments or a DeepSpeed config")
      ->check(CLI::IsMember({"megatron", "deepspeed"}));
  plan->add_option("--candidates", po->candidates,
                   "Write every evaluated layout with its prediction or rejection reason (JSON)");
  plan->add_option("--threads", po->threads, "Search threads (default: all cores)")->check(CLI::NonNegativeNumber);
  plan->callback([po, &state] { state.exit_code = RunPlan(*po); });

  auto so = std::make_shared<SimulateOptions>();
  auto* sim = root.add_subcommand("simulate", "Predict one layout's step time, memory and trace");
  AddCommon(sim, *so, false);
  sim->add_option("--plan", so->plan, "Plan JSON file or inline dp=..,tp=..,pp=..")->required();
  sim->add_option("--trace", so->trace, "Write the predicted trace (Chrome/Perfetto JSON, .gz ok)");
  sim->add_flag("--all-ranks", so->all_ranks, "Trace every rank (default when the world is <= 64 ranks)");
  sim->callback([so, &state] { state.exit_code = RunSimulate(*so); });
}

}  // namespace parallax::cli
