#pragma once
// OpRecorder: times every op this rank runs and tags it with DESIGN.md's identity
// (step, rank, microbatch, stage, layer, op, phase), so the measured trace aligns with the
// planner's predicted one. Each op is bracketed by two events on its own stream (a collective's
// slice is its transfer on the comm stream, not the host's wait), and the events are resolved
// into times once per step (Resolve), never with a synchronization per op. Conventions: TP collectives and pipeline send/recv carry the phase
// of the pass they belong to (fwd / bwd / recompute); DP syncs carry phase comm with
// microbatch -1; optimizer and grad_clip carry phase optim.

#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "model/op_identity.h"
#include "traces/trace.h"
#include "traces/tracer.h"

namespace parallax::executor {

struct MeasuredOp {
  OpIdentity id;
  traces::Stream stream = traces::Stream::kCompute;
  int64_t start_ns = 0;  //!< since the job's common epoch
  int64_t dur_ns = 0;
  double flops = -1;
  int64_t bytes = -1;
  int32_t group_size = 0;
};

//! Which stream an op runs on (compute, tp-comm, dp-comm, pp-comm).
traces::Stream StreamOf(OpKind op);
//! The backend stream of an op (the same four tracks).
StreamKind StreamKindOf(OpKind op);

class OpRecorder {
 public:
  OpRecorder(Backend* backend, int64_t rank) : backend_(backend), rank_(rank) {}

  //! Where the following ops run: micro-batch, model stage and phase.
  struct Where {
    int64_t microbatch = -1;
    int64_t stage = -1;
    Phase phase = Phase::kFwd;
  };

  class Scope {
   public:
    Scope(OpRecorder* r, OpIdentity id, double flops, int64_t bytes, int32_t group_size);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpRecorder* r_;
    size_t index_ = 0;
  };

  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  void set_step(int64_t step) { step_ = step; }
  void set_where(const Where& w) { where_ = w; }
  const Where& where() const { return where_; }
  //! Event that start times are measured from; recorded after a world barrier, kept for the job.
  void set_epoch(Event e) { epoch_ = e; }

  //! Times an op at the current place (layer -1 for embedding/head/none).
  Scope Op(OpKind op, int64_t layer, double flops = -1, int64_t bytes = -1, int32_t group_size = 0) {
    return Scope(this, Identity(op, layer), flops, bytes, group_size);
  }
  //! Times an op with an explicit micro-batch/stage/phase (DP sync, optimizer).
  Scope OpAt(OpKind op, int64_t microbatch, int64_t stage, int64_t layer, Phase phase, int64_t bytes = -1,
             int32_t group_size = 0) {
    return Scope(this, IdentityAt(op, microbatch, stage, layer, phase), -1, bytes, group_size);
  }
  //! The identity of an op at an explicit place in the current step.
  OpIdentity IdentityAt(OpKind op, int64_t microbatch, int64_t stage, int64_t layer, Phase phase) const {
    return OpIdentity{step_, rank_, microbatch, stage, layer, op, phase};
  }

  //! Resolves the events of the ops recorded since the last call into start/duration times
  //! (waits for the streams to pass them) and recycles the events. Once per step.
  Status Resolve();

  const std::vector<MeasuredOp>& ops() const { return ops_; }
  void Clear() { ops_.clear(); }
  //! Seconds spent in compute-stream ops of `step`.
  double ComputeSeconds(int64_t step) const;

  //! Collective over `world`: gathers every rank's ops; on world rank 0 appends them to `tracer`
  //! (tracer may be null on other ranks).
  Status GatherInto(Communicator& world, traces::Tracer* tracer) const;

 private:
  OpIdentity Identity(OpKind op, int64_t layer) const {
    return OpIdentity{step_, rank_, where_.microbatch, where_.stage, layer, op, where_.phase};
  }
  Backend* backend_;
  int64_t rank_;
  bool enabled_ = true;
  int64_t step_ = 0;
  Event epoch_;
  Where where_;
  std::vector<MeasuredOp> ops_;
  struct Pending {
    size_t op = 0;
    Event begin, end;
  };
  std::vector<Pending> pending_;
};

}  // namespace parallax::executor
