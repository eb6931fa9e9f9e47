#include "executor/runtime/training_loop.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "executor/runtime/checkpoint.h"
#include "executor/runtime/classic/classic_modes.h"
#include "executor/runtime/collective_status.h"
#include "executor/runtime/device_timeline.h"
#include "traces/chrome_writer.h"
#include "traces/tracer.h"

namespace parallax::executor {
namespace {

// "rank=R,step=S" kills rank R at the start of step S; "...,signal=STOP" stops it instead (a hung
// rank: alive, silent).
void MaybeInjectFault(const std::string& spec, int rank, int64_t step) {
  if (spec.empty()) return;
  int r = -1;
  long long s = -1;
  if (std::sscanf(spec.c_str(), "rank=%d,step=%lld", &r, &s) != 2 || r != rank || s != step) return;
  std::raise(spec.find("signal=STOP") != std::string::npos ? SIGSTOP : SIGKILL);
}

}  // namespace

Result<TrainingReport> RunTraining(const Plan& plan, Backend& backend, Communicator& world,
                                   const TrainingRunOptions& o, const StartCallback& on_start,
                                   const StepCallback& on_step, bool* step_failed) {
  *step_failed = false;
  if (o.steps <= 0) return BadInput("--steps must be > 0");
  if (o.resume && o.checkpoint_dir.empty()) return BadInput("--resume needs --checkpoint-dir");
  std::string fault = o.fault_inject;
  if (fault.empty()) {
    if (const char* env = std::getenv("PARALLAX_FAULT_INJECT")) fault = env;
  }
  // Threads before the trainer: its initialisation already runs kernels.
  PX_ASSIGN(auto threads, PlanHostThreads(world, o.threads));
  backend.UseHostThreads(threads);
  double any_oversubscribed = threads.oversubscribed ? 1 : 0;
  PX_TRY(world.HostAllReduce(&any_oversubscribed, 1, ReduceOp::kMax));
  if (!plan.layout.sync.is_default()) {
    TrainingReport base;
    base.host_threads = threads;
    base.host_threads.oversubscribed = any_oversubscribed > 0;
    base.intra_op_threads = backend.IntraOpThreads();
    return RunClassicModes(plan, backend, world, o, std::move(base), on_start, on_step, step_failed);
  }
  PX_ASSIGN(const InjectSlow slow, ParseInjectSlow(o.inject_slow));
  TrainerOptions topt = o.trainer;
  topt.record_ops = topt.record_ops || !o.trace_path.empty();
  topt.init_threads = threads.threads;
  auto created = Trainer::Create(plan, backend, world, topt);
  // Plan errors are identical everywhere; a failing data file or allocation may not be: agree.
  if (Status agreed = AgreeOnStatus(world, created ? Status() : Status(created.error())); !agreed) {
    return created ? agreed.error() : created.error();
  }
  Trainer& t = **created;
  if (o.activity != nullptr) t.recorder().set_activity(o.activity);
  TrainingReport report;
  report.host_threads = threads;
  report.host_threads.oversubscribed = any_oversubscribed > 0;
  report.intra_op_threads = backend.IntraOpThreads();
  if (!o.checkpoint_dir.empty()) {
    PX_TRY(PrepareCheckpointDir(world, o.checkpoint_dir));
    if (o.resume) {
      PX_TRY(t.LoadCheckpoint(o.checkpoint_dir));
      report.resumed = true;
    }
  }
  report.first_step = t.step();
  report.data_description = t.data().Describe();
  if (on_start) on_start(t);

  for (int64_t i = 0; i < o.steps; ++i) {
    MaybeInjectFault(fault, world.rank(), t.step());
    // A straggler on demand sleeps after its backward passes, as in the classic modes (InjectSlow).
    const auto started = std::chrono::steady_clock::now();
    GradientHook slow_down;
    if (slow.applies_to(world.rank())) {
      slow_down = [&](Trainer&) -> Result<bool> {
        PX_TRY(slow.SleepAfterBackward(world.rank(), started, backend));
        return true;
      };
    }
    auto r = t.Step(slow_down);
    if (!r) {
      *step_failed = true;
      return r.error();
    }
    report.losses.push_back(r->loss);
    report.aux_losses.push_back(r->aux_loss);
    report.step_times_s.push_back(r->step_time_s);
    report.grad_norms.push_back(r->grad_norm);
    report.skipped.push_back(r->skipped);
    report.loss_scale = r->loss_scale;
    if (on_step) on_step(*r);
    const bool last = i + 1 == o.steps;
    if (!o.checkpoint_dir.empty() &&
        (last || (o.checkpoint_every > 0 && (t.step() - report.first_step) % o.checkpoint_every == 0))) {
      PX_TRY(t.SaveCheckpoint(o.checkpoint_dir));
    }
  }

  if (o.activity != nullptr) {
    const ActivityStats st = o.activity->stats();
    const TimelineSummary& d = t.recorder().device_summary();
    report.profiling = {o.activity->source(), st.records,   st.dropped,      d.device_records, d.attributed,
                        d.ops_retimed,        d.nccl_kernels, d.nccl_in_collectives};
  }
  // Every rank's peak and what it held; the report keeps the highest (the lowest rank on a tie).
  const MemoryStats& mem = backend.memory();
  std::array<int64_t, 1 + kMemoryKinds> mine{mem.peak_bytes};
  std::copy(mem.at_peak_by_kind.begin(), mem.at_peak_by_kind.end(), mine.begin() + 1);
  std::vector<std::array<int64_t, 1 + kMemoryKinds>> all(static_cast<size_t>(world.size()));
  PX_TRY(world.HostAllGather(mine.data(), all.data(), static_cast<int64_t>(sizeof(mine))));
  const auto& top = *std::max_element(all.begin(), all.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  report.peak_memory_bytes = top[0];
  std::copy(top.begin() + 1, top.end(), report.peak_memory_by_kind.begin());
  if (!o.trace_path.empty()) {
    PX_TRY(WriteMeasuredTrace(plan, backend, world, o.trace_path,
                              [&](traces::Tracer* tracer) { return t.recorder().GatherInto(world, tracer); }));
  }
  return report;
}

Status WriteMeasuredTrace(const Plan& plan, Backend& backend, Communicator& world, const std::string& path,
                          const std::function<Status(traces::Tracer*)>& gather) {
  const bool root = world.rank() == 0;
  traces::Tracer tracer("measured");
  traces::TraceMetadata& meta = tracer.metadata();
  meta.tool_version = "parallax 0.1.0";
  meta.plan = PlanToJson(plan);
  meta.model = plan.model.name;
  meta.world_size = world.size();
  meta.comm_progress = backend.CollectivesProgressOnHostThread() ? "host" : "device";
  PX_TRY(gather(root ? &tracer : nullptr));
  Status written;
  if (root) written = traces::WriteChromeTrace(tracer.trace(), path);
  return AgreeOnStatus(world, written);
}

}  // namespace parallax::executor
