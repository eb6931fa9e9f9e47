// `parallax run`: trains a plan for real, under mpirun (one process per rank):
//   mpirun -np 2 parallax run --plan dp=2,micro_batch=2 --model gpt-tiny --global-batch 8 --steps 10
// Every rank parses the same arguments and reaches the same verdict on bad input; rank 0 prints
// it and every rank exits with status 2, so the job never hangs. Per-rank failures during training
// abort the whole job (MPI_Abort) after printing the reason.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "executor/backend_registry.h"
#include "executor/launch.h"
#include "executor/runtime/checkpoint.h"
#include "executor/runtime/collective_status.h"
#include "executor/runtime/trainer.h"
#include "model/load.h"
#include "traces/chrome_writer.h"
#include "traces/tracer.h"

namespace parallax::cli {
namespace {

struct RunOptions {
  std::string plan;
  std::string model;
  std::string cluster = "local-cpu";
  int64_t global_batch = 0;
  int64_t steps = 10;
  std::string backend = "cpu";
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  bool resume = false;
  bool json = false;
  std::string trace;
  std::string data;
  int64_t seed = -1;
  double lr = -1;
  double timeout_s = 30;
};

// Test hook: PARALLAX_FAULT_INJECT="rank=R,step=S" kills rank R (SIGKILL) at the start of step S.
void MaybeInjectFault(int rank, int64_t step) {
  const char* spec = std::getenv("PARALLAX_FAULT_INJECT");
  if (spec == nullptr) return;
  int r = -1;
  long long s = -1;
  if (std::sscanf(spec, "rank=%d,step=%lld", &r, &s) == 2 && r == rank && s == step) std::raise(SIGKILL);
}

Result<Plan> ResolveRunPlan(const RunOptions& o) {
  std::optional<ModelSpec> model;
  if (!o.model.empty()) {
    auto m = ResolveModel(o.model);
    if (!m) return m.error();
    model = *m;
  }
  auto cluster = ResolveCluster(o.cluster);
  if (!cluster) return cluster.error();
  TrainingSpec training;
  training.global_batch = o.global_batch;
  auto plan = ResolvePlan(o.plan, model ? &*model : nullptr, &*cluster, training);
  if (!plan) return plan.error();
  if (o.seed >= 0) plan->training.seed = o.seed;
  if (o.lr > 0) plan->training.lr = o.lr;
  if (o.steps <= 0) return BadInput("--steps must be > 0");
  if (o.resume && o.checkpoint_dir.empty()) return BadInput("--resume needs --checkpoint-dir");
  return plan;
}

Json TraceMetadataPlan(const Plan& p) { return PlanToJson(p); }

int Run(const RunOptions& o) {
  auto launch = executor::InitLaunch(nullptr, nullptr);
  const bool root = launch->world_rank() == 0;
  // Bad input: every rank reaches the same verdict; only rank 0 speaks.
  auto fail = [&](const Error& e) {
    if (root) return ReportError(e, o.json);
    return ExitCodeFor(e);
  };
  auto plan = ResolveRunPlan(o);
  if (!plan) return fail(plan.error());
  // The CPU backend trains in fp32 (weights, activations and Adam state); say so when the plan
  // asked for mixed precision, since memory and speed then differ from the plan's prediction.
  const Precision requested = plan->training.precision;
  plan->training.precision = Precision::kFp32;
  if (root && requested != Precision::kFp32) {
    std::fprintf(stderr, "parallax run: note: the cpu backend trains in fp32; the plan's %s precision runs as fp32\n",
                 ToString(requested));
  }
  if (!executor::MpiCompiledIn() && plan->layout.world_size() > 1) {
    return fail(BadInput("this parallax was built without MPI (PARALLAX_WITH_MPI off), so it runs one process; "
                         "the plan needs " + std::to_string(plan->layout.world_size()) + " ranks"));
  }
  auto backend = executor::CreateBackend(o.backend);
  if (!backend) return fail(backend.error());
  auto world = launch->World(o.timeout_s);
  if (!world) return fail(world.error());
  executor::Communicator& comm = **world;

  executor::TrainerOptions topt;
  topt.data.file = o.data;
  topt.data.seed = plan->training.seed;
  topt.record_ops = !o.trace.empty();
  auto trainer = executor::Trainer::Create(*plan, **backend, comm, topt);
  if (!trainer) {
    // Plan errors are identical everywhere; a failing data file may not be: agree first.
    Status agreed = executor::AgreeOnStatus(comm, Status(trainer.error()));
    return fail(agreed ? trainer.error() : agreed.error());
  }
  if (Status s = executor::AgreeOnStatus(comm, Status()); !s) return fail(s.error());
  executor::Trainer& t = **trainer;
  if (!o.checkpoint_dir.empty()) {
    if (Status s = executor::PrepareCheckpointDir(comm, o.checkpoint_dir); !s) return fail(s.error());
    if (o.resume) {
      if (Status s = t.LoadCheckpoint(o.checkpoint_dir); !s) return fail(s.error());
    }
  }
  const Layout& l = plan->layout;
  if (root && !o.json) {
    std::printf("parallax run: %s on %d rank(s) (%s, backend %s), layout %s, %lld micro-batch(es) per step\n",
                plan->model.name.c_str(), launch->world_size(), launch->transport().c_str(), o.backend.c_str(),
                LayoutToString(l).c_str(), static_cast<long long>(l.num_microbatches()));
    std::printf("data: %s\n", t.data().Describe().c_str());
    if (o.resume) std::printf("resumed from %s at step %lld\n", o.checkpoint_dir.c_str(), static_cast<long long>(t.step()));
    std::fflush(stdout);
  }

  std::vector<double> losses, times;
  const int64_t first = t.step();
  for (int64_t i = 0; i < o.steps; ++i) {
    MaybeInjectFault(launch->world_rank(), t.step());
    auto r = t.Step();
    if (!r) {
      std::fprintf(stderr, "parallax: rank %d: step %lld failed: %s\n", launch->world_rank(),
                   static_cast<long long>(t.step()), r.error().message.c_str());
      std::fflush(stderr);
      comm.Abort(1);
      return 1;
    }
    losses.push_back(r->loss);
    times.push_back(r->step_time_s);
    if (root && !o.json) {
      std::printf("step %4lld  loss %.6f  grad_norm %.4f  time %.1f ms\n", static_cast<long long>(r->step), r->loss,
                  r->grad_norm, r->step_time_s * 1e3);
      std::fflush(stdout);
    }
    const bool last = i + 1 == o.steps;
    if (!o.checkpoint_dir.empty() && (last || (o.checkpoint_every > 0 && (t.step() - first) % o.checkpoint_every == 0))) {
      if (Status s = t.SaveCheckpoint(o.checkpoint_dir); !s) return fail(s.error());
    }
  }

  double peak = static_cast<double>((*backend)->memory().peak_bytes);
  if (Status s = comm.AllReduce(&peak, 1, executor::ReduceOp::kMax); !s) return fail(s.error());
  if (!o.trace.empty()) {
    traces::Tracer tracer("measured");
    traces::TraceMetadata& meta = tracer.metadata();
    meta.tool_version = "parallax 0.1.0";
    meta.plan = TraceMetadataPlan(*plan);
    meta.model = plan->model.name;
    meta.world_size = launch->world_size();
    if (Status s = t.recorder().GatherInto(comm, root ? &tracer : nullptr); !s) return fail(s.error());
    Status written;
    if (root) written = traces::WriteChromeTrace(tracer.trace(), o.trace);
    if (Status s = executor::AgreeOnStatus(comm, written); !s) return fail(s.error());
  }
  if (root) {
    double mean = 0;
    for (size_t i = times.size() > 1 ? 1 : 0; i < times.size(); ++i) mean += times[i];
    mean /= static_cast<double>(times.size() > 1 ? times.size() - 1 : times.size());
    if (o.json) {
      PrintJson(Json{{"losses", losses},
                     {"step_times_s", times},
                     {"peak_memory_bytes", static_cast<int64_t>(peak)},
                     {"layout", LayoutToJson(l)},
                     {"model", plan->model.name},
                     {"world_size", launch->world_size()},
                     {"backend", o.backend},
                     {"precision", ToString(plan->training.precision)},
                     {"requested_precision", ToString(requested)},
                     {"first_step", first}});
    } else {
      std::printf("mean step time %.1f ms (after the first step), peak memory %.2f MiB per rank (max)\n", mean * 1e3,
                  peak / (1024.0 * 1024.0));
      if (!o.trace.empty()) std::printf("measured trace: %s\n", o.trace.c_str());
    }
  }
  return 0;
}

}  // namespace

void RegisterRunCommand(CLI::App& root, CliState& state) {
  auto* cmd = root.add_subcommand("run", "Run a plan for real (under mpirun: one process per rank)");
  auto o = std::make_shared<RunOptions>();
  cmd->add_option("--plan", o->plan, "Plan JSON file (parallax plan -o) or inline dp=..,tp=..,pp=..")->required();
  cmd->add_option("--model", o->model, "Model preset or JSON (required with an inline plan; overrides the plan's)");
  cmd->add_option("--cluster", o->cluster, "Cluster preset or JSON for an inline plan")->capture_default_str();
  cmd->add_option("--global-batch", o->global_batch, "Sequences per step (overrides the plan)");
  cmd->add_option("--steps", o->steps, "Training steps to run")->capture_default_str();
  cmd->add_option("--backend", o->backend, "cpu or cuda")->capture_default_str();
  cmd->add_option("--checkpoint-dir", o->checkpoint_dir, "Write sharded checkpoints here (after the last step)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every, "Also checkpoint every N steps");
  cmd->add_flag("--resume", o->resume, "Resume from the latest checkpoint in --checkpoint-dir");
  cmd->add_flag("--json", o->json, "Print one JSON object: losses, step_times_s, peak_memory_bytes, layout");
  cmd->add_option("--trace", o->trace, "Write the measured trace of every rank's ops (Chrome JSON, .gz ok)");
  cmd->add_option("--data", o->data, "Byte-level text corpus (default: synthetic token stream)");
  cmd->add_option("--seed", o->seed, "Seed for weights and data (default: the plan's)");
  cmd->add_option("--lr", o->lr, "Learning rate (default: the plan's)");
  cmd->add_option("--timeout", o->timeout_s, "Seconds a rank waits for a peer before naming it lost")
      ->capture_default_str();
  cmd->callback([o, &state] { state.exit_code = Run(*o); });
}

}  // namespace parallax::cli
