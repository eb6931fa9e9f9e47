#pragma once
// `parallax run` for the classic modes a plan can ask for (model/sync_mode.h): parameter servers
// (dedicated ranks after the workers, or colocated with the first workers), async and SSP, backup
// workers, compression of the gradient all-reduce, local SGD / federated averaging.
// Every worker trains its own full replica (dp=1, global_batch/W sequences per iteration, its own
// samples: worker_data.h) through the same Trainer as the all-reduce path; only the exchange
// between the backward passes and the optimizer differs (Trainer::Step's GradientHook).
// The report's losses: one entry per step, each the mean over the workers that ran it.

#include <chrono>
#include <cstdint>
#include <string>

#include "executor/runtime/training_loop.h"

namespace parallax::executor {

//! `run --inject-slow rank=R,factor=F`: rank R's compute takes F times as long (it sleeps F-1
//! times its compute after each backward pass), a straggler on demand.
struct InjectSlow {
  int64_t rank = -1;
  double factor = 1;
  bool applies_to(int64_t r) const { return r == rank && factor > 1; }
  //! On the slow rank `r`, sleeps F-1 times the time since `start` (its step's start; called after
  //! its backward passes, so the sleep stretches its compute, not the exchanges around it), once
  //! `backend`'s compute stream has caught up (a GPU runs the kernels after the host enqueued them).
  //! The sleep leaves the CPU to other ranks, as a slower device would.
  Status SleepAfterBackward(int64_t r, std::chrono::steady_clock::time_point start, Backend& backend) const;
};
Result<InjectSlow> ParseInjectSlow(const std::string& spec);

//! What the executor runs of the classic modes: tp = pp = 1, ZeRO 0, fp32, and the world the plan
//! asks for (workers + dedicated servers).
Status ValidateClassicExecution(const Plan& plan, int64_t world_size);

//! RunTraining for a plan whose layout.sync is not the default. `base` carries what RunTraining
//! already decided (host threads).
Result<TrainingReport> RunClassicModes(const Plan& plan, Backend& backend, Communicator& world,
                                       const TrainingRunOptions& options, TrainingReport base,
                                       const StartCallback& on_start, const StepCallback& on_step, bool* step_failed);

}  // namespace parallax::executor
