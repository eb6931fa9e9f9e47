#pragma once
// Trainer: one rank's whole training job for a Plan — process groups, sharded model, data,
// pipeline schedule, gradient sync, optimizer, checkpoints. Every rank of `world` constructs one
// with the same plan; Step() is collective.
//
//   auto t = Trainer::Create(plan, backend, world, options);
//   for (...) { auto r = (*t)->Step(); ... r->loss ... }

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "executor/backend.h"
#include "executor/runtime/context.h"
#include "executor/runtime/data.h"
#include "executor/runtime/op_recorder.h"
#include "executor/runtime/process_groups.h"
#include "executor/runtime/sharded_model.h"
#include "model/plan.h"

namespace parallax::executor {

struct TrainerOptions {
  DataOptions data;
  bool record_ops = false;  //!< keep every op's timing and identity (for --trace)
  //! Host threads that generate the initial weights; 0: the machine's (RunTraining passes the
  //! rank's share of its CPUs).
  int64_t init_threads = 0;
  //! Element type of DP gradient collectives: kF32 (default, Megatron's accumulate and reduce in
  //! fp32) or kBf16 (halves the bytes on the wire; gradients stay fp32 in memory).
  DType grad_reduce = DType::kF32;
  double initial_loss_scale = 65536;  //!< fp16 only (2^16, apex's default)
  int64_t loss_scale_window = 1000;   //!< fp16: clean steps before the scale doubles (Megatron's default)
  //! Test hook: at this step (0-based) one gradient element becomes +inf before the optimizer, as
  //! an fp16 overflow would make it (-1: never).
  int64_t inject_overflow_step = -1;
};

struct StepResult {
  int64_t step = 0;        //!< 0-based index of the step just run
  double loss = 0;         //!< mean cross-entropy over the global batch (identical on every rank)
  //! MoE: the auxiliary load-balancing losses (summed over the MoE layers, mean over micro-batches)
  //! the step also minimised; 0 for a dense model.
  double aux_loss = 0;
  double step_time_s = 0;  //!< slowest rank's wall time of the step
  double grad_norm = 0;
  bool skipped = false;    //!< fp16 overflow: no update, loss scale halved
  double loss_scale = 1;   //!< fp16 loss scale after the step (1 otherwise)
};

//! Checks a plan for the executor: the layout against the model and `world_size`, plus what the
//! executor needs beyond ValidateLayout (vocab divisible by tp, layers >= stages, seq_len).
Status ValidateForExecution(const Plan& plan, int64_t world_size);

class Trainer;
//! Runs between a step's backward passes and its optimizer (the classic modes' gradient exchange,
//! executor/runtime/classic/): returns whether the local optimizer still runs (false: the hook
//! installed the step's new weights itself).
using GradientHook = std::function<Result<bool>(Trainer&)>;

class Trainer {
 public:
  static Result<std::unique_ptr<Trainer>> Create(const Plan& plan, Backend& backend, Communicator& world,
                                                 const TrainerOptions& options);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  Result<StepResult> Step(const GradientHook& hook = {});
  //! Collective: the forward and backward passes of the current step and the DP/embedding gradient
  //! sync, without the optimizer; returns the step's mean loss. Gradients stay in the groups.
  Result<double> ComputeGradients();
  //! Collective: writes the state after step() completed steps.
  Status SaveCheckpoint(const std::string& dir);
  //! Collective: restores the latest checkpoint in `dir`; training continues from its step.
  Status LoadCheckpoint(const std::string& dir);

  int64_t step() const { return step_; }
  //! The next step's index (the classic modes' backup workers jump to the coordinator's step).
  void set_step(int64_t step) { step_ = step; }
  //! Replaces the data source (a classic-mode worker's own samples, executor/runtime/classic/worker_data.h).
  void set_data(std::unique_ptr<DataSource> data) { data_ = std::move(data); }
  OpRecorder& recorder() { return rec_; }
  const ProcessGroups& groups() const { return groups_; }
  const RuntimeContext& context() const { return ctx_; }
  const DataSource& data() const { return *data_; }
  ShardedModel& model() { return *model_; }
  //! The auxiliary (MoE load-balancing) loss of the last ComputeGradients (0 for a dense model).
  double aux_loss() const { return aux_loss_; }

 private:
  Trainer(Backend& backend, int64_t rank) : rec_(&backend, rank) {}
  ProcessGroups groups_;
  TrainerOptions options_;
  OpRecorder rec_;
  RuntimeContext ctx_;
  std::unique_ptr<ShardedModel> model_;
  std::unique_ptr<DataSource> data_;
  int64_t step_ = 0;
  double aux_loss_ = 0;  //!< the last ComputeGradients' auxiliary loss (StepResult::aux_loss)
};

}  // namespace parallax::executor
