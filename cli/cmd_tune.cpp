// `parallax tune`: plan, run the top candidates, refine from their traces, re-plan until the
// measured best stops changing (profiler/tune/tune.h). Launched under mpirun, one process per
// rank, as `parallax run` is:
//   mpirun -np 2 parallax tune --model gpt-tiny --cluster cluster.json --costdb db.json
//       --global-batch 8 --top 3 --steps 6 -o best.json --json
// Rank 0 prints and writes; every rank exits with the same status. Thin: parse, call, print.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "cli/inputs.h"
#include "executor/backend_registry.h"
#include "executor/launch.h"
#include "profiler/tune/tune.h"

namespace parallax::cli {
namespace {

struct TuneCliOptions {
  InputArgs in;  //!< --cluster defaults to local-cpu
  std::string output, costdb_out, backend = "cpu", work_dir;
  std::string fix;
  int64_t top = 3, steps = 6, rounds = 4;
  double timeout_s = 30;
  double memory_limit_MiB = 0;
  bool json = false;
};

int RunTuneCli(const TuneCliOptions& o) {
  auto launch = executor::InitLaunch(nullptr, nullptr);
  const bool root = launch->world_rank() == 0;
  auto fail = [&](const Error& e) { return root ? ReportError(e, o.json) : ExitCodeFor(e); };
  InputArgs args = o.in;
  args.warn = root;
  args.backend = o.backend;
  auto in = ResolveSearchInputs(args);
  if (!in) return fail(in.error());
  const ClusterSpec& cluster = in->cluster;
  if (cluster.total_gpus() != launch->world_size()) {
    return fail(BadInput("the cluster has " + std::to_string(cluster.total_gpus()) + " devices but the job has " +
                         std::to_string(launch->world_size()) + " ranks (run under mpirun -np " +
                         std::to_string(cluster.total_gpus()) + ")"));
  }
  if (o.steps < 2) return fail(BadInput("--steps must be >= 2 (the first step is warm-up)"));
  if (o.top < 1) return fail(BadInput("--top must be >= 1 (candidates run per round)"));
  if (o.rounds < 1) return fail(BadInput("--rounds must be >= 1"));
  auto fix = planner::ParseConstraints(o.fix);
  if (!fix) return fail(fix.error());
  if (root) NotePrecision(in->precision, o.json);
  profiler::TuneOptions to;
  to.model = in->model;
  to.cluster = in->cluster;
  to.training = in->training;
  to.top_k = o.top;
  to.steps = o.steps;
  to.max_rounds = o.rounds;
  to.fix = *fix;
  to.backend = o.backend;
  to.timeout_s = o.timeout_s;
  to.memory_limit_bytes = static_cast<int64_t>(o.memory_limit_MiB * 1024 * 1024);
  const std::filesystem::path out_path(o.output);
  to.work_dir = !o.work_dir.empty() ? o.work_dir
                : out_path.has_parent_path() ? out_path.parent_path().string()
                                             : std::string(".");
  if (!o.json) to.log = [](const std::string& line) { std::printf("%s\n", line.c_str()), std::fflush(stdout); };
  const std::string costdb_out =
      !o.costdb_out.empty() ? o.costdb_out : (out_path.parent_path() / (out_path.stem().string() + ".costdb.json")).string();

  auto backend = executor::CreateBackend(o.backend);
  if (!backend) return fail(backend.error());
  auto world = (*backend)->ConnectWorld(*launch, o.timeout_s);
  if (!world) return fail(world.error());
  auto r = profiler::RunTune(*launch, *backend, *world, *in->db, to);
  if (!r) return fail(r.error());
  if (!root) return 0;
  if (Status st = SaveCostDbFile(costdb_out, r->db); !st) return ReportError(st.error(), o.json);
  if (Status st = SavePlanFile(o.output, r->best_plan); !st) return ReportError(st.error(), o.json);
  if (o.json) {
    Json j = profiler::TuneToJson(*r, costdb_out);
    j["plan"] = o.output;
    AddPrecisionJson(j, in->precision);
    PrintJson(j);
    return 0;
  }
  const auto& best = r->candidates[static_cast<size_t>(r->best)];
  std::printf("measured best after %lld round(s): %s, %.3f ms per step (predicted %.3f ms)\n",
              static_cast<long long>(r->rounds), LayoutToString(best.layout).c_str(), best.measured_step_s * 1e3,
              best.predicted_step_s * 1e3);
  std::printf("wrote %s and %s\n", o.output.c_str(), costdb_out.c_str());
  return 0;
}

}  // namespace

void RegisterTuneCommand(CLI::App& root, CliState& state) {
  auto o = std::make_shared<TuneCliOptions>();
  auto* cmd = root.add_subcommand("tune", "Run the top candidates, refine from their traces, re-plan (under mpirun)");
  SetExample(cmd, "mpirun -np 2 parallax tune --model gpt-tiny --cluster cluster.json --costdb costdb.json "
                  "--global-batch 8 -o best.json");
  cmd->add_option("--model", o->in.model, "Model preset or JSON")->required();
  o->in.cluster = "local-cpu";
  cmd->add_option("--cluster", o->in.cluster, "Cluster preset or JSON (its device count = the job's ranks)")
      ->capture_default_str();
  cmd->add_option("--costdb", o->in.costdb, "Cost database to start from (parallax calibrate)")->required();
  cmd->add_option("-o,--output", o->output, "The measured-best plan")->required();
  cmd->add_option("--costdb-out", o->costdb_out, "Refined cost database (default: <output stem>.costdb.json)");
  cmd->add_option("--global-batch", o->in.global_batch, "Sequences per step (default: searched)")->check(AtLeast(1));
  cmd->add_option("--top", o->top, "Candidates run per round")->capture_default_str();
  cmd->add_option("--steps", o->steps, "Steps per candidate (the first is warm-up)")->capture_default_str();
  cmd->add_option("--rounds", o->rounds, "At most this many plan-run-refine rounds")->capture_default_str();
  cmd->add_option("--backend", o->backend, "cpu or cuda")->capture_default_str();
  cmd->add_option("--precision", o->in.precision,
                  "Training precision: bf16, fp16, fp32 or fp8 (default: fp32 on a CPU device, bf16 on a GPU)")
      ->check(PrecisionCheck());
  cmd->add_option("--timeout", o->timeout_s, "Seconds a rank waits for a peer before naming it lost")
      ->capture_default_str();
  cmd->add_option("--memory-limit-MiB", o->memory_limit_MiB,
                  "Cap each rank's backend memory (candidates that need more fail and are recorded)");
  cmd->add_option("--fix", o->fix, "Pin dimensions of every candidate: k=v,... (as plan's --fix)");
  cmd->add_option("--work-dir", o->work_dir, "Where the candidates' measured traces go (default: the output's folder)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &state] { state.exit_code = RunTuneCli(*o); });
}

}  // namespace parallax::cli
