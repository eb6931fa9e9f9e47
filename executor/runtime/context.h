#pragma once
// RuntimeContext: what every runtime component of one rank needs, passed explicitly (no globals),
// and the small helpers the runtime uses to talk to the backend: typed allocation that fails as a
// value (out of memory included), events kept until the step ends, and collectives run on their
// comm stream with the compute stream ordered around them.

#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/op_recorder.h"
#include "executor/runtime/process_groups.h"
#include "model/plan.h"
#include "model/result.h"

namespace parallax::executor {

class ParamGroup;

//! fp16 dynamic loss scaling (Micikevicius et al. 2018, section 3.2; Megatron-LM's
//! DynamicGradScaler): an overflow skips the step and halves the scale; `window` clean steps in a
//! row double it.
struct LossScaler {
  bool enabled = false;
  double scale = 1;
  int64_t window = 1000;
  int64_t clean_steps = 0;
  double min_scale = 1;
};

struct RuntimeContext {
  Backend* backend = nullptr;
  ProcessGroups* groups = nullptr;
  OpRecorder* rec = nullptr;
  ModelSpec model;
  TrainingSpec training;
  Layout layout;

  DType compute = DType::kF32;      //!< weights read by the forward pass, and activations
  DType grad_reduce = DType::kF32;  //!< element type of DP gradient collectives (gradients stay fp32)
  bool fp8 = false;                 //!< linear layers' GEMMs in FP8 (Precision::kFp8; runtime/fp8_linear.h)
  DelayedScaling fp8_recipe;        //!< Transformer Engine's defaults
  LossScaler scaler;

  int64_t seq = 0;           //!< sequence length of a sample
  int64_t batch = 0;         //!< sequences per micro-batch (layout.micro_batch)
  int64_t cp = 1;            //!< context parallel ranks
  int64_t cp_idx = 0;        //!< this rank's place in its cp group
  int64_t local_seq = 0;     //!< positions of a sample on this rank: its two cp chunks (model/cp_chunks.h)
  int64_t tokens = 0;        //!< local_seq * batch: rows of a full activation
  int64_t local_tokens = 0;  //!< rows of an activation between TP regions (tokens / tp with SP)
  bool sp = false;           //!< sequence parallelism on (and tp > 1)
  int64_t tp = 1;
  int64_t init_threads = 1;  //!< host threads that generate the initial weights
  float loss_scale = 1;      //!< d(step loss)/d(token loss) = 1 / (global_batch * seq)
  Tensor loss_sum;           //!< one fp64 on the backend: this rank's summed token losses of the step
  //! Mixture of experts: this rank's shares of the step's auxiliary load-balancing losses, summed
  //! over its MoE layers and micro-batches (host; the world's sum over micro-batches per step).
  double aux_loss_sum = 0;
  //! d(step loss)/d(one micro-batch's auxiliary loss): micro_batch / global_batch (the step's loss
  //! is the mean over micro-batches of LM + auxiliary loss, as Megatron-Core scales it).
  double aux_loss_weight = 1;
  //! ZeRO 2/3 groups with a reduce-scatter in flight (at most one: folded at the next flush).
  std::vector<ParamGroup*> pending_grad_groups;

  Communicator& tp_comm() const { return *groups->tp; }
  Communicator& dp_comm() const { return *groups->dp; }

  //! Activation of the compute dtype, contents undefined: every caller overwrites it whole (a GEMM
  //! with beta 0, a kernel output, a copy or a receive), so no zero-fill runs on the hot path.
  Result<Tensor> Act(int64_t numel) { return backend->Allocate(numel, compute, MemoryKind::kActivations); }
  //! Zero-filled activation (for outputs a kernel writes only in part).
  Result<Tensor> ActZeroed(int64_t numel) {
    return backend->AllocateZeroed(numel, compute, MemoryKind::kActivations);
  }
  //! Zero-filled fp32 tensor (norm statistics, loss pieces).
  Result<Tensor> F32(int64_t numel, MemoryKind kind = MemoryKind::kActivations) {
    return backend->AllocateZeroed(numel, DType::kF32, kind);
  }
  //! Copies host integers (tokens, targets, positions) into a new backend tensor.
  Result<Tensor> Indices(const std::vector<int32_t>& host);

  //! An event on `s` that lives until EndStep() (ordering only; timing events belong to the recorder).
  Event Mark(StreamKind s) {
    step_events_.push_back(backend->RecordEvent(s));
    return step_events_.back();
  }
  //! Work enqueued on `s` from now on starts after the compute stream's work so far.
  Status AfterCompute(StreamKind s) { return backend->WaitEvent(s, Mark(StreamKind::kCompute)); }
  //! The compute stream's later work waits for everything enqueued on `s` so far.
  Status ComputeAfter(StreamKind s) { return backend->WaitEvent(StreamKind::kCompute, Mark(s)); }
  //! Synchronizes every stream and recycles this step's ordering events.
  Status EndStep();

 private:
  std::vector<Event> step_events_;
};

}  // namespace parallax::executor
