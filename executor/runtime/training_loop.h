#pragma once
// The training loop of `parallax run`, written once for every backend: create the trainer, resume,
// run the steps (with the fault-injection test hook), checkpoint on its cadence, gather the
// measured trace, and report. The CLI only parses options and prints what this returns.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/device_activity.h"
#include "executor/host_threads.h"
#include "executor/runtime/trainer.h"
#include "model/plan.h"
#include "model/step_time.h"

namespace parallax::executor {

struct TrainingRunOptions {
  int64_t steps = 10;
  std::string checkpoint_dir;  //!< empty: no checkpoints
  int64_t checkpoint_every = 0;
  bool resume = false;
  std::string trace_path;  //!< measured trace (Chrome JSON, .gz ok); empty: none
  TrainerOptions trainer;
  //! Test hook "rank=R,step=S[,signal=STOP]": rank R kills (SIGKILL) or stops (SIGSTOP) itself at
  //! the start of step S.
  //! Defaults to the PARALLAX_FAULT_INJECT environment variable.
  std::string fault_inject;
  //! "rank=R,factor=F": rank R computes F times slower (a straggler; executor/runtime/classic/classic_modes.h).
  std::string inject_slow;
  //! Intra-op threads per rank: > 0 forces the count; 0 shares the node's CPUs among its ranks
  //! (executor/host_threads.h; OPENBLAS_NUM_THREADS or OMP_NUM_THREADS, when set, win).
  int64_t threads = 0;
  //! Device activity tracer (CUPTI) that times the recorded ops; null: events time them.
  DeviceActivity* activity = nullptr;
};

//! How the measured ops were timed, and what the device tracer saw (rank 0's).
struct ProfilingReport {
  std::string source = "events";  //!< "events" (backend events / host clocks) or the tracer's ("cupti")
  int64_t records = 0;            //!< device tracer records delivered
  int64_t dropped = 0;            //!< records the tracer lost (full buffers)
  int64_t device_records = 0;     //!< kernels, copies and fills
  int64_t attributed = 0;         //!< of which inside a recorded op
  int64_t ops_retimed = 0;        //!< ops timed by their device records
  int64_t nccl_kernels = 0;
  int64_t nccl_in_collectives = 0;
};

struct TrainingReport {
  std::vector<double> losses;
  std::vector<double> aux_losses;  //!< MoE: StepResult::aux_loss per step (0 for a dense model)
  std::vector<double> step_times_s;
  std::vector<double> grad_norms;
  std::vector<bool> skipped;  //!< fp16 overflow steps
  int64_t first_step = 0;
  int64_t peak_memory_bytes = 0;  //!< max over ranks
  //! What the peak held, by MemoryKind, on the rank with the highest peak (the lowest such rank).
  std::array<int64_t, kMemoryKinds> peak_memory_by_kind{};
  double loss_scale = 1;
  std::string data_description;
  bool resumed = false;
  HostThreads host_threads;      //!< rank 0's decision; oversubscribed is true if any host is
  int64_t intra_op_threads = 1;  //!< what rank 0's backend runs kernels on after applying it
  ProfilingReport profiling;
  //! The run's step time: MeasuredStepTime (model/step_time.h) of step_times_s.
  double step_time_s() const { return MeasuredStepTime(step_times_s); }
  //! Classic modes: seconds from the common start until every worker finished step i.
  std::vector<double> wall_clock_s;
  //! Async/SSP: pushes applied at each staleness (index = updates between pull and push).
  std::vector<int64_t> staleness_histogram;
  int64_t dropped_gradients = 0;  //!< backup workers: gradients that came too late
};

//! Called on every rank after each step (the CLI prints on rank 0).
using StepCallback = std::function<void(const StepResult&)>;
//! Called once the trainer exists (data description, resume point), before the first step.
using StartCallback = std::function<void(const Trainer&)>;

//! Collective over `world`. Bad input (plan, data, checkpoint) comes back as an error that every
//! rank agrees on; a failure inside a step is returned on the rank that saw it (the caller ends the
//! job, since its peers may be blocked in a collective).
Result<TrainingReport> RunTraining(const Plan& plan, Backend& backend, Communicator& world,
                                   const TrainingRunOptions& options, const StartCallback& on_start,
                                   const StepCallback& on_step, bool* step_failed);

//! Collective over `world`: the measured trace of a run, written to `path` by world rank 0 with
//! its metadata (plan, model, world size, how collectives progressed). `gather` adds every rank's
//! part (itself a collective; the tracer is null off rank 0). Every rank returns the write's status.
Status WriteMeasuredTrace(const Plan& plan, Backend& backend, Communicator& world, const std::string& path,
                          const std::function<Status(traces::Tracer*)>& gather);

}  // namespace parallax::executor
