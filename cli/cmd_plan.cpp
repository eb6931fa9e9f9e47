// `parallax plan`: search the fastest layout that fits; `parallax simulate`: predict one layout's
// step time, memory and trace. Thin: parse, call the planner, print.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "cli/search_report.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/estimate/sync_modes.h"
#include "planner/export/deepspeed.h"
#include "planner/export/megatron.h"
#include "planner/memory/memory_model.h"
#include "planner/search/search.h"
#include "planner/sim/simulator.h"
#include "traces/chrome_writer.h"

namespace parallax::cli {
namespace {

//! The classic mode's estimate (throughput, waits, staleness) and, with a failure rate, the goodput
//! and Young/Daly checkpoint interval; null when neither the plan nor the cluster asks for them.
Json ClassicJson(const Plan& plan, const CostDb* db) {
  const bool mode = !plan.layout.sync.is_default() || !plan.cluster.stragglers.empty();
  if (!mode && plan.cluster.failures.empty()) return nullptr;
  planner::CostContext ctx(plan.cluster, plan.training.precision, db, &plan.implementation);
  const planner::PlanCosts pc = planner::CostPlan(ctx, plan);
  const planner::StepTime ar = planner::EstimateStepTime(plan, pc);
  const planner::ModeEstimate e = planner::EstimateSyncMode(plan, pc, ar, db);
  Json j = Json::object();
  if (mode) {
    j["sync_mode"] = planner::ModeEstimateToJson(e);
    j["sync_mode"]["layout"] = LayoutToString(plan.layout);
  }
  if (!plan.cluster.failures.empty()) {
    const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : plan.model.seq_len;
    j["goodput"] = planner::GoodputToJson(planner::EstimateGoodput(
        plan, mode ? e.step_time_s : ar.step_time_s, static_cast<double>(plan.layout.global_batch * seq)));
  }
  return j;
}

//! The text form of ClassicJson.
void PrintClassic(const Json& c) {
  if (c.is_null()) return;
  if (c.contains("sync_mode")) {
    const Json& m = c["sync_mode"];
    std::printf("classic mode     %s: step %s (all-reduce %s), compute %s, exchange %s, wait %s",
                m["layout"].get<std::string>().c_str(), HumanSeconds(m["step_time_s"].get<double>()).c_str(),
                HumanSeconds(m["allreduce_step_time_s"].get<double>()).c_str(), HumanSeconds(m["compute_s"].get<double>()).c_str(),
                HumanSeconds(m["exchange_s"].get<double>()).c_str(), HumanSeconds(m["wait_s"].get<double>()).c_str());
    if (m.contains("mean_staleness")) std::printf(", mean staleness %.2f", m["mean_staleness"].get<double>());
    std::printf("\n");
  }
  if (c.contains("goodput")) {
    const Json& g = c["goodput"];
    std::printf("failures         job MTBF %s, checkpoint every %s (Young/Daly; write %s, restore %s): goodput %.1f%%\n",
                HumanSeconds(g["job_mtbf_s"].get<double>()).c_str(), HumanSeconds(g["checkpoint_interval_s"].get<double>()).c_str(),
                HumanSeconds(g["checkpoint_write_s"].get<double>()).c_str(), HumanSeconds(g["checkpoint_restore_s"].get<double>()).c_str(),
                100 * g["goodput"].get<double>());
  }
}

//! What `simulate` says beside a prediction of a layout outside what it searches: a TP group across
//! nodes, a ZeRO stage the plan's implementation does not run (its max_zero_stage fact).
std::vector<std::string> SimulateNotes(const Plan& plan) {
  std::vector<std::string> notes;
  if (TpSpansNodes(plan.layout, plan.cluster)) {
    const bool nodes = plan.cluster.domain_size() == plan.cluster.gpus_per_node;
    notes.push_back("tp=" + std::to_string(plan.layout.tp) + " spans " +
                    std::to_string(plan.layout.tp / plan.cluster.domain_size()) +
                    (nodes ? " nodes" : " NVLink domains") + ": TP collectives are costed over the inter-node links");
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
  InputArgs in;
  bool json = false;
};

struct PlanOptions : CommonOptions {
  int64_t top = 5;
  std::string fix, output, export_kind, candidates;
  int threads = 0;
};

struct SimulateOptions : CommonOptions {
  std::string trace;
  bool all_ranks = false;
};

void AddCommon(CLI::App* cmd, CommonOptions& o, bool model_required) {
  auto* m = cmd->add_option("--model", o.in.model, "Model preset, model JSON or Hugging Face config.json");
  auto* c = cmd->add_option("--cluster", o.in.cluster, "Cluster preset or cluster JSON");
  if (model_required) {
    m->required();
    c->required();
  }
  cmd->add_option("--nodes", o.in.nodes, "Node count for a preset cluster")->check(AtLeast(1));
  cmd->add_option("--global-batch", o.in.global_batch, "Sequences per step (default: searched / from the plan)")
      ->check(AtLeast(1));
  AddSeqLenOption(cmd, o.in);
  cmd->add_option("--precision", o.in.precision,
                  "Training precision: bf16, fp16, fp32 or fp8 (default: the plan's; for a new plan fp32 on a CPU "
                  "device, bf16 on a GPU)")
      ->check(PrecisionCheck());
  cmd->add_option("--costdb", o.in.costdb, "Measured costs (parallax calibrate / nccl-tests import)");
  cmd->add_option("--implementation", o.in.implementation,
                  "What runs the plan: parallax, megatron-core, nemo, megatron-2021, megatron-2022, deepspeed, pytorch, or a profile JSON");
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

void PrintBreakdownRow(int rank, const Layout& l, const planner::Prediction& p, const std::optional<double>& mfu) {
  // An MoE layout's expert dimensions follow the row (a dense row is unchanged).
  std::string experts = l.ep != 1 || l.etp != 0 ? "  ep=" + std::to_string(l.ep) + " etp=" +
                                                      std::to_string(l.expert_tp())
                                                : "";
  // So do an explicit pipeline split and selective recompute's named modules.
  if (l.first_stage_layers != 0 || l.last_stage_layers != 0) {
    experts += "  layers first/last=" + std::to_string(l.first_stage_layers) + "/" + std::to_string(l.last_stage_layers);
  }
  if (l.recompute == Recompute::kSelective && l.selective_modules() != kRecomputeCoreAttn) {
    experts += "  recompute_modules=" + RecomputeModulesToString(l.selective_modules());
  }
  std::printf("%3d  dp=%-3lld tp=%-2lld pp=%-3lld cp=%-3lld zero=%lld mb=%-2lld gb=%-5lld %-9s %-11s v=%-2lld sp=%d  %9s %10s %7.1f %6s %10s%s\n",
              rank, (long long)l.dp, (long long)l.tp, (long long)l.pp, (long long)l.cp, (long long)l.zero_stage, (long long)l.micro_batch,
              (long long)l.global_batch, ToString(l.recompute), ToString(l.schedule), (long long)l.virtual_stages,
              l.sequence_parallel ? 1 : 0, HumanSeconds(p.step_time_s).c_str(), HumanCount(p.tokens_per_s).c_str(),
              p.model_tflops_per_gpu, MfuText(mfu).c_str(), HumanBytes(p.peak_memory_bytes).c_str(), experts.c_str());
}

void PrintPrediction(const planner::Prediction& p, const std::optional<double>& mfu) {
  const auto& b = p.breakdown;
  std::printf("step time        %s (%s tokens/s)\n", HumanSeconds(p.step_time_s).c_str(), HumanCount(p.tokens_per_s).c_str());
  std::printf("model TFLOP/s    %.1f per GPU (MFU %s), hardware %.1f incl. recompute\n", p.model_tflops_per_gpu,
              MfuText(mfu).c_str(), p.hardware_tflops_per_gpu);
  std::printf("peak memory      %s per GPU%s\n", HumanBytes(p.peak_memory_bytes).c_str(), p.fits ? "" : "  (DOES NOT FIT)");
  std::printf("breakdown        compute %s, TP comm %s, DP comm %s, PP comm %s, bubble %s\n",
              HumanSeconds(b.compute_s).c_str(), HumanSeconds(b.tp_comm_s).c_str(), HumanSeconds(b.dp_comm_s).c_str(),
              HumanSeconds(b.pp_comm_s).c_str(), HumanSeconds(b.bubble_s).c_str());
}

//! A prediction's --json entry, with the MFU as shown (null where no peak is known).
Json EntryJson(const Layout& l, const planner::Prediction& p, const std::optional<double>& mfu) {
  Json j = planner::PlanEntryJson(l, p);
  j["mfu"] = mfu ? Json(*mfu) : Json(nullptr);
  return j;
}

//! `plan --export megatron|deepspeed`: the best plan as the implementation's own arguments.
int PrintExport(const std::string& kind, const Plan& best, bool json) {
  if (kind == "megatron") {
    const auto args = planner::ExportMegatron(best);
    for (const auto& w : args.warnings) std::fprintf(stderr, "parallax plan: megatron export: %s\n", w.c_str());
    if (json) {
      PrintJson(Json{{"megatron_args", args.args}, {"warnings", args.warnings}, {"implementation", best.implementation.name}});
    } else {
      std::printf("# predicted with implementation profile %s\n%s\n", best.implementation.name.c_str(),
                  args.CommandLine().c_str());
    }
    return 0;
  }
  Json ds = planner::ExportDeepSpeed(best);
  if (ds["parallax"].contains("warning")) {
    std::fprintf(stderr, "parallax plan: deepspeed export: %s\n", ds["parallax"]["warning"].get<std::string>().c_str());
  }
  ds["parallax_implementation"] = best.implementation.name;  // the profile the prediction used
  PrintJson(ds);
  return 0;
}

int RunPlan(const PlanOptions& o) {
  auto in = ResolveSearchInputs(o.in);
  if (!in) return ReportError(in.error(), o.json);
  auto fix = planner::ParseConstraints(o.fix);
  if (!fix) return ReportError(fix.error(), o.json);
  if (o.export_kind != "" && o.export_kind != "megatron" && o.export_kind != "deepspeed") {
    return ReportError(BadInput("--export: expected megatron or deepspeed, got \"" + o.export_kind + "\""), o.json);
  }
  const CostDb* db = in->db ? &*in->db : nullptr;
  planner::SearchOptions so;
  so.top_k = std::max<int64_t>(o.top, 1);
  so.threads = o.threads;
  so.fix = *fix;
  so.db = db;
  so.implementation = in->implementation;
  so.record_candidates = !o.candidates.empty();
  so.progress = [](int64_t done, int64_t total) {
    if (total >= 200000) std::fprintf(stderr, "\rparallax plan: %lld / %lld layouts", (long long)done, (long long)total);
    if (total >= 200000 && done == total) std::fprintf(stderr, "\n");
  };
  NotePrecision(in->precision, o.json);
  auto r = planner::Search(in->model, in->cluster, in->training, so);
  if (!r) return ReportError(r.error(), o.json);
  if (!o.candidates.empty()) {
    if (Status st = WriteCandidates(o.candidates, in->model, in->cluster, in->training, *r); !st) {
      return ReportError(st.error(), o.json);
    }
  }
  if (r->plans.empty()) return ReportError(NoLayoutError(*in, *fix, *r), o.json, RejectedJson(*r));
  Plan best;
  best.model = in->model;
  best.cluster = in->cluster;
  best.training = in->training;
  best.implementation = in->implementation;
  best.layout = r->plans.front().layout;
  best.training.global_batch = best.layout.global_batch;
  best.prediction = planner::PredictionToJson(r->plans.front().prediction);
  if (!o.output.empty()) {
    if (Status st = SavePlanFile(o.output, best); !st) return ReportError(st.error(), o.json);
  }
  if (!o.export_kind.empty()) return PrintExport(o.export_kind, best, o.json);
  auto mfu = [&](const planner::Prediction& p) { return ShownMfu(p, in->cluster, in->training.precision, db); };
  if (o.json) {
    Json plans = Json::array();
    for (const auto& p : r->plans) plans.push_back(EntryJson(p.layout, p.prediction, mfu(p.prediction)));
    Json j = RejectedJson(*r);
    j["plans"] = plans;
    if (Json c = ClassicJson(best, db); !c.is_null()) j["classic"] = c;
    j["search_time_s"] = r->search_time_s;
    AddPrecisionJson(j, in->precision);
    PrintJson(j);
    return 0;
  }
  const ModelSpec& model = in->model;
  const ClusterSpec& cluster = in->cluster;
  std::printf("%s on %lld x %s (%s), %lld layouts searched in %s\n", model.name.c_str(),
              (long long)cluster.total_gpus(), cluster.device.name.c_str(), cluster.name.c_str(),
              (long long)r->searched, HumanSeconds(r->search_time_s).c_str());
  std::printf("step times: the simulator's (as `simulate` prints them) for the top %zu by the closed form\n\n",
              r->plans.size());
  std::printf("%3s  %-73s  %9s %10s %7s %6s %10s\n", "#", "layout", "step", "tokens/s", "TFLOP/s", "MFU", "memory");
  int i = 1;
  for (const auto& p : r->plans) PrintBreakdownRow(i++, p.layout, p.prediction, mfu(p.prediction));
  std::printf("\nbest: ");
  PrintPrediction(r->plans.front().prediction, mfu(r->plans.front().prediction));
  PrintClassic(ClassicJson(best, db));
  std::printf("\nrejected, by rule:%s\n", r->rejected.empty() ? " none" : "");
  for (const auto& [k, v] : r->rejected) {
    std::printf("  %6lld %s: %s\n", (long long)v, k.c_str(), RejectionInWords(k, *in).c_str());
  }
  if (!o.output.empty()) std::printf("wrote %s\n", o.output.c_str());
  return 0;
}

int RunSimulate(const SimulateOptions& o) {
  auto in = ResolvePlanInputs(o.in);
  if (!in) return ReportError(in.error(), o.json);
  const Plan& plan = in->plan;
  if (Status st = ValidateLayout(plan.layout, plan.model, plan.cluster); !st) return ReportError(st.error(), o.json);
  if (const std::string cp = CpCommTypeProblem(plan.layout, plan.model, plan.implementation); !cp.empty()) {
    return ReportError(BadInput("plan: " + cp), o.json);
  }
  const CostDb* db = in->db ? &*in->db : nullptr;
  planner::SimOptions so;
  so.record_trace = !o.trace.empty();
  so.all_ranks = o.all_ranks || plan.layout.world_size() <= 64;
  NotePrecision(in->precision, o.json);
  auto sim = planner::Simulate(plan, db, so);
  if (!sim) return ReportError(sim.error(), o.json);
  if (sim->trace) {
    if (Status st = traces::WriteChromeTrace(*sim->trace, o.trace); !st) return ReportError(st.error(), o.json);
  }
  const auto& p = sim->prediction;
  const auto mfu = ShownMfu(p, plan.cluster, plan.training.precision, db);
  const Json classic = ClassicJson(plan, db);
  if (o.json) {
    Json j = EntryJson(plan.layout, p, mfu);
    if (!classic.is_null()) j["classic"] = classic;
    Json mem = Json::array();
    for (int64_t r = 0; r < plan.layout.pp; ++r) {
      const auto b = planner::EstimateRankMemory(plan, r);
      mem.push_back({{"pp_rank", r}, {"weights", b.weights}, {"gradients", b.gradients}, {"optimizer", b.optimizer},
                     {"activations", b.activations}, {"workspace", b.workspace}, {"reserve", b.reserve},
                     {"total", b.total}});
    }
    j["memory_per_pp_rank"] = mem;
    j["implementation"] = plan.implementation.name;
    if (auto notes = SimulateNotes(plan); !notes.empty()) j["notes"] = notes;
    j["events"] = sim->events;
    if (!o.trace.empty()) j["trace"] = o.trace;
    AddPrecisionJson(j, in->precision);
    PrintJson(j);
    return 0;
  }
  std::printf("%s on %lld x %s: %s\n", plan.model.name.c_str(), (long long)plan.cluster.total_gpus(),
              plan.cluster.device.name.c_str(), LayoutToString(plan.layout).c_str());
  PrintPrediction(p, mfu);
  PrintClassic(classic);
  std::printf("implementation   %s\n", plan.implementation.name.c_str());
  for (const std::string& n : SimulateNotes(plan)) std::printf("note             %s\n", n.c_str());
  for (int64_t r = 0; r < plan.layout.pp; ++r) {
    const auto b = planner::EstimateRankMemory(plan, r);
    std::printf("  pp rank %-4lld weights %s, grads %s, optimizer %s, activations %s, workspace %s, total %s\n",
                (long long)r, HumanBytes(b.weights).c_str(), HumanBytes(b.gradients).c_str(),
                HumanBytes(b.optimizer).c_str(), HumanBytes(b.activations).c_str(), HumanBytes(b.workspace).c_str(),
                HumanBytes(b.total).c_str());
    if (r == 3 && plan.layout.pp > 6) {
      std::printf("  ... (%lld more pipeline ranks)\n", (long long)(plan.layout.pp - 4));
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
  SetExample(plan, "parallax plan --model llama3-8b --cluster dgx-h100 --nodes 2 --global-batch 256 -o plan.json");
  AddCommon(plan, *po, true);
  plan->add_option("--top", po->top, "How many plans to list")->capture_default_str()->check(AtLeast(1));
  plan->add_option("--fix", po->fix, "Pin dimensions: k=v,... (dp, tp, pp, cp, zero, micro_batch, global_batch, "
                                      "recompute, schedule, virtual_stages, sequence_parallel)");
  plan->add_option("-o,--output", po->output, "Write the best plan (self-contained JSON)");
  plan->add_option("--export", po->export_kind, "Print the best plan as Megatron-LM arguments or a DeepSpeed config")
      ->check(CLI::IsMember({"megatron", "deepspeed"}));
  plan->add_option("--candidates", po->candidates,
                   "Write every evaluated layout with its prediction or rejection reason (JSON)");
  plan->add_option("--threads", po->threads, "Search threads (default: all cores)")->check(AtLeast(0));
  plan->callback([po, &state] { state.exit_code = RunPlan(*po); });

  auto so = std::make_shared<SimulateOptions>();
  auto* sim = root.add_subcommand("simulate", "Predict one layout's step time, memory and trace");
  SetExample(sim, "parallax simulate --model gpt-1.3b --cluster dgx-h100 --plan dp=4,tp=2,global_batch=64 "
                  "--trace predicted.json.gz");
  AddCommon(sim, *so, false);
  sim->add_option("--plan", so->in.plan, "Plan JSON file or inline dp=..,tp=..,pp=..")->required();
  sim->add_option("--trace", so->trace, "Write the predicted trace (Chrome/Perfetto JSON, .gz ok)");
  sim->add_flag("--all-ranks", so->all_ranks, "Trace every rank (default when the world is <= 64 ranks)");
  sim->callback([so, &state] { state.exit_code = RunSimulate(*so); });
}

}  // namespace parallax::cli
