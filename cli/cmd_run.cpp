// `parallax run`: trains a plan for real, under mpirun (one process per rank):
//   mpirun -np 2 parallax run --plan dp=2,micro_batch=2 --model gpt-tiny --global-batch 8 --steps 10
// The loop lives in executor/runtime/training_loop; this file parses and prints. Every rank parses
// the same arguments and reaches the same verdict on bad input; rank 0 prints it and every rank
// exits with status 2, so the job never hangs. Per-rank failures during a step abort the whole
// job (MPI_Abort) after printing the reason.
#include <array>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/inputs.h"
#include "executor/backend_registry.h"
#include "executor/launch.h"
#include "executor/runtime/training_loop.h"
#include "profiler/cuda/cupti_tracer.h"

namespace parallax::cli {
namespace {

struct RunOptions {
  InputArgs in;  //!< --cluster defaults to local-cpu
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
  int64_t threads = 0;
  std::string grad_reduce = "fp32";
  bool no_cupti = false;
  std::string inject_slow;
};

//! {"weights": bytes, ...} in MemoryKind order (the names simulate's memory_per_pp_rank uses).
Json PeakByKindJson(const std::array<int64_t, executor::kMemoryKinds>& kinds) {
  Json j = Json::object();
  for (int k = 0; k < executor::kMemoryKinds; ++k) {
    j[executor::ToString(static_cast<executor::MemoryKind>(k))] = kinds[static_cast<size_t>(k)];
  }
  return j;
}

Result<PlanInputs> ResolveRunPlan(const RunOptions& o) {
  auto in = ResolvePlanInputs(o.in);
  if (!in) return in.error();
  if (o.seed >= 0) in->plan.training.seed = o.seed;
  if (o.lr > 0) in->plan.training.lr = o.lr;
  if (o.grad_reduce != "fp32" && o.grad_reduce != "bf16") {
    return BadInput("--grad-reduce " + o.grad_reduce + ": expected fp32 or bf16");
  }
  if (o.steps <= 0) return BadInput("--steps must be > 0");
  if (o.resume && o.checkpoint_dir.empty()) return BadInput("--resume needs --checkpoint-dir");
  return in;
}

int Run(const RunOptions& o) {
  auto launch = executor::InitLaunch(nullptr, nullptr);
  const bool root = launch->world_rank() == 0;
  // Bad input: every rank reaches the same verdict; only rank 0 speaks.
  auto fail = [&](const Error& e) {
    if (root) return ReportError(e, o.json);
    return ExitCodeFor(e);
  };
  auto in = ResolveRunPlan(o);
  if (!in) return fail(in.error());
  const Plan& plan = in->plan;
  if (root) NotePrecision(in->precision, o.json);
  if (!executor::MpiCompiledIn() && launch->world_size() == 1 && plan.layout.world_size() > 1) {
    return fail(BadInput("this parallax was built without MPI (PARALLAX_WITH_MPI off), so it runs one process; "
                         "the plan needs " + std::to_string(plan.layout.world_size()) + " ranks"));
  }
  // The device tracer starts before the backend creates its CUDA context, so CUPTI sees all of it.
  // Without CUPTI (missing, too old, refused) the run goes on, timed by CUDA events; said once.
  std::unique_ptr<executor::DeviceActivity> activity;
  std::string activity_problem;
  if (o.backend == "cuda" && !o.trace.empty() && !o.no_cupti) {
    auto started = profiler::StartDeviceTracer(o.backend);
    if (started) {
      activity = std::move(*started);
    } else {
      activity_problem = started.error().message;
      if (root) {
        std::fprintf(stderr, "parallax: CUPTI unavailable (%s); ops are timed with CUDA events\n",
                     activity_problem.c_str());
      }
    }
  }
  auto backend = executor::CreateBackend(o.backend);
  if (!backend) return fail(backend.error());
  if (Status st = CheckBackendDevice(o.backend, plan.cluster); !st) return fail(st.error());
  auto world = (*backend)->ConnectWorld(*launch, o.timeout_s);
  if (!world) return fail(world.error());
  executor::Communicator& comm = **world;

  executor::TrainingRunOptions ro;
  ro.steps = o.steps;
  ro.checkpoint_dir = o.checkpoint_dir;
  ro.checkpoint_every = o.checkpoint_every;
  ro.resume = o.resume;
  ro.trace_path = o.trace;
  ro.threads = o.threads;
  ro.inject_slow = o.inject_slow;
  ro.activity = activity.get();
  ro.trainer.data.file = o.data;
  ro.trainer.data.seed = plan.training.seed;
  ro.trainer.grad_reduce = o.grad_reduce == "bf16" ? executor::DType::kBf16 : executor::DType::kF32;
  const Layout& l = plan.layout;
  auto on_start = [&](const executor::Trainer& t) {
    if (!root || o.json) return;
    std::printf("parallax run: %s on %d rank(s) (%s, backend %s, %s), layout %s, %lld micro-batch(es) per step\n",
                plan.model.name.c_str(), launch->world_size(), launch->transport().c_str(), o.backend.c_str(),
                ToString(plan.training.precision), LayoutToString(l).c_str(),
                static_cast<long long>(l.num_microbatches()));
    std::printf("data: %s\n", t.data().Describe().c_str());
    if (o.resume) {
      std::printf("resumed from %s at step %lld\n", o.checkpoint_dir.c_str(), static_cast<long long>(t.step()));
    }
    std::fflush(stdout);
  };
  auto on_step = [&](const executor::StepResult& r) {
    if (!root || o.json) return;
    std::printf("step %4lld  loss %.6f  grad_norm %.4f  time %.1f ms%s\n", static_cast<long long>(r.step), r.loss,
                r.grad_norm, r.step_time_s * 1e3,
                r.skipped ? "  (fp16 overflow: step skipped, loss scale halved)" : "");
    std::fflush(stdout);
  };
  bool step_failed = false;
  auto report = executor::RunTraining(plan, **backend, comm, ro, on_start, on_step, &step_failed);
  if (!report) {
    if (!step_failed) return fail(report.error());
    // A failure inside a step: peers may be blocked in a collective, so end the whole job.
    std::fprintf(stderr, "parallax: rank %d: step failed: %s\n", launch->world_rank(),
                 report.error().message.c_str());
    std::fflush(stderr);
    comm.Abort(1);
    return 1;
  }
  if (root) {
    if (o.json) {
      Json classic = Json::object();
      if (!l.sync.is_default()) {
        classic = Json{{"sync", SyncToString(l.sync)},
                       {"compression", CompressionToString(l.sync)},
                       {"data", DataToString(l.sync)},
                       {"wall_clock_s", report->wall_clock_s},
                       {"staleness_histogram", report->staleness_histogram},
                       {"dropped_gradients", report->dropped_gradients}};
      }
      Json out{{"losses", report->losses},
                     {"classic", classic},
                     {"step_times_s", report->step_times_s},
                     {"step_time_s", report->step_time_s()},
                     {"step_time_rule", kMeasuredStepRule},
                     {"grad_norms", report->grad_norms},
                     {"skipped_steps", report->skipped},
                     {"loss_scale", report->loss_scale},
                     {"peak_memory_bytes", report->peak_memory_bytes},
                     {"peak_memory_by_kind", PeakByKindJson(report->peak_memory_by_kind)},
                     {"layout", LayoutToJson(l)},
                     {"model", plan.model.name},
                     {"world_size", launch->world_size()},
                     {"backend", o.backend},
                     {"precision", ToString(plan.training.precision)},
                     {"precision_source", in->precision.source},
                     {"grad_reduce", o.grad_reduce},
                     {"first_step", report->first_step},
                     {"profiling", Json{{"source", report->profiling.source},
                                        {"records", report->profiling.records},
                                        {"dropped", report->profiling.dropped},
                                        {"device_records", report->profiling.device_records},
                                        {"attributed", report->profiling.attributed},
                                        {"ops_retimed", report->profiling.ops_retimed},
                                        {"nccl_kernels", report->profiling.nccl_kernels},
                                        {"nccl_in_collectives", report->profiling.nccl_in_collectives},
                                        {"unavailable", activity_problem}}},
                     {"threads", Json{{"per_rank", report->host_threads.threads},
                                      {"intra_op", report->intra_op_threads},
                                      {"source", report->host_threads.source},
                                      {"cpus", report->host_threads.cpus},
                                      {"ranks_on_node", report->host_threads.ranks_on_node},
                                      {"cpu_share", report->host_threads.cpu_share},
                                      {"oversubscribed", report->host_threads.oversubscribed}}}};
      // The auxiliary load-balancing losses the step minimised beside `losses` (the LM loss).
      if (plan.model.moe()) out["aux_losses"] = report->aux_losses;
      PrintJson(out);
    } else {
      const executor::HostThreads& ht = report->host_threads;
      std::printf("threads: %lld per rank (%s; %lld CPU(s), %lld rank(s) on rank 0's host%s)\n",
                  static_cast<long long>(report->intra_op_threads), ht.source.c_str(),
                  static_cast<long long>(ht.cpus), static_cast<long long>(ht.ranks_on_node),
                  ht.oversubscribed ? "; more ranks than CPUs: waits yield" : "");
      std::printf("step time %.1f ms (%s), peak memory %.2f MiB per rank (max)\n",
                  report->step_time_s() * 1e3, kMeasuredStepRule,
                  static_cast<double>(report->peak_memory_bytes) / (1024.0 * 1024.0));
      if (!o.trace.empty()) {
        const executor::ProfilingReport& p = report->profiling;
        std::printf("measured trace: %s (ops timed by %s", o.trace.c_str(),
                    p.source == "events" ? (o.backend == "cuda" ? "CUDA events" : "host clocks") : p.source.c_str());
        if (p.source != "events") {
          std::printf("; %lld device records, %lld in recorded ops, %lld ops GPU-timed", static_cast<long long>(p.device_records),
                      static_cast<long long>(p.attributed), static_cast<long long>(p.ops_retimed));
        }
        std::printf(")\n");
      }
      if (report->profiling.dropped > 0) {
        std::printf("warning: CUPTI dropped %lld records (every activity buffer was full): the trace misses them\n",
                    static_cast<long long>(report->profiling.dropped));
      }
    }
  }
  return 0;
}

}  // namespace

void RegisterRunCommand(CLI::App& root, CliState& state) {
  auto* cmd = root.add_subcommand("run", "Run a plan for real (under mpirun: one process per rank)");
  SetExample(cmd, "mpirun -np 2 parallax run --plan dp=2,micro_batch=2 --model gpt-tiny --global-batch 8 --steps 10");
  auto o = std::make_shared<RunOptions>();
  cmd->add_option("--plan", o->in.plan, "Plan JSON file (parallax plan -o) or inline dp=..,tp=..,pp=..")->required();
  cmd->add_option("--model", o->in.model, "Model preset or JSON (required with an inline plan; overrides the plan's)");
  o->in.cluster = "local-cpu";
  cmd->add_option("--cluster", o->in.cluster, "Cluster preset or JSON for an inline plan")->capture_default_str();
  cmd->add_option("--global-batch", o->in.global_batch, "Sequences per step (overrides the plan)")->check(AtLeast(1));
  AddSeqLenOption(cmd, o->in);
  cmd->add_option("--steps", o->steps, "Training steps to run")->capture_default_str();
  cmd->add_option("--backend", o->backend, "cpu or cuda")->capture_default_str();
  cmd->add_option("--checkpoint-dir", o->checkpoint_dir, "Write sharded checkpoints here (after the last step)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every, "Also checkpoint every N steps");
  cmd->add_flag("--resume", o->resume, "Resume from the latest checkpoint in --checkpoint-dir");
  cmd->add_flag("--json", o->json, "Print one JSON object: losses (and aux_losses for an MoE model), step_times_s, step_time_s (the run's step time: median after the first step), peak_memory_bytes (and peak_memory_by_kind), layout");
  cmd->add_option("--trace", o->trace,
                  "Write the measured trace of every rank's ops (Chrome JSON, .gz ok); with --backend cuda, CUPTI "
                  "times them on the GPU and adds kernels, host launches and launch->kernel flows");
  cmd->add_flag("--no-cupti", o->no_cupti, "With --backend cuda --trace: time ops with CUDA events, not CUPTI");
  cmd->add_option("--data", o->data, "Byte-level text corpus (default: synthetic token stream)");
  cmd->add_option("--seed", o->seed, "Seed for weights and data (default: the plan's)");
  cmd->add_option("--lr", o->lr, "Learning rate (default: the plan's)");
  cmd->add_option("--precision", o->in.precision,
                  "Training precision: bf16, fp16, fp32 or fp8 (default: the plan's; for an inline plan fp32 on a CPU "
                  "device, bf16 on a GPU)")
      ->check(PrecisionCheck());
  cmd->add_option("--grad-reduce", o->grad_reduce, "Element type of DP gradient reduction: fp32 or bf16")
      ->capture_default_str();
  cmd->add_option("--inject-slow", o->inject_slow,
                  "rank=R,factor=F: rank R computes F times slower (a straggler, for the classic modes' tests)");
  cmd->add_option("--threads", o->threads,
                  "Intra-op threads per rank (default 0: share each node's CPUs among its ranks)")
      ->check(AtLeast(0));
  cmd->add_option("--timeout", o->timeout_s, "Seconds a rank waits for a peer before naming it lost")
      ->capture_default_str();
  cmd->callback([o, &state] { state.exit_code = Run(*o); });
}

}  // namespace parallax::cli
