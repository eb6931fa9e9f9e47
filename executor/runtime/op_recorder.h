#pragma once
// OpRecorder: times every op this rank runs and tags it with DESIGN.md's identity
// (step, rank, microbatch, stage, layer, op, phase), so the measured trace aligns with the
// planner's predicted one. Each op is bracketed by two events on its own stream (a collective's
// slice is its transfer on the comm stream, not the host's wait), and the events are resolved
// into times once per step (Resolve), never with a synchronization per op. Conventions: TP collectives and pipeline send/recv carry the phase
// of the pass they belong to (fwd / bwd / recompute); DP syncs carry phase comm with
// microbatch -1; optimizer and grad_clip carry phase optim.

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/backend.h"
#include "executor/device_activity.h"
#include "model/op_catalogue.h"
#include "model/op_identity.h"
#include "traces/trace.h"
#include "traces/tracer.h"

namespace parallax::executor {

struct DeviceSlice;
struct TimelineSummary;

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
  OpRecorder(Backend* backend, int64_t rank);

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
  //! The rank in the identities of the ops recorded afterwards (a classic-mode worker's replica
  //! runs on a one-rank communicator; its ops carry its rank in the job).
  void set_rank(int64_t rank) { rank_ = rank; }
  void set_where(const Where& w) { where_ = w; }
  const Where& where() const { return where_; }
  //! Event that start times are measured from; recorded after a world barrier, kept for the job.
  void set_epoch(Event e) { epoch_ = e; }
  //! The op catalogue of the run (model/op_catalogue.h): every op recorded afterwards is tagged
  //! with its entry's FLOPs (Megatron's convention, as the planner's predicted trace) and, for a
  //! compute op, HBM bytes. The catalogue is the one definition; callers pass no FLOPs of their own.
  //! `layer_kinds`: each global layer's LayerKindOf (an MoE layer's ops are tagged from its kind's
  //! list); empty: every layer is tagged from catalogue.layer.
  void set_catalogue(const OpCatalogue& catalogue, std::vector<int> layer_kinds = {});
  //! A device activity tracer (CUPTI): every op is bracketed with EnterOp/ExitOp, and Resolve
  //! re-times the ops from the device's own records and keeps those records for the trace.
  //! Null (the default): events alone time the ops.
  void set_activity(DeviceActivity* a) { activity_ = a; }
  DeviceActivity* activity() const { return activity_; }
  //! The device records kept so far (recorder clock; DeviceSlice::op indexes ops()).
  const std::vector<DeviceSlice>& device_slices() const { return device_slices_; }
  //! Totals over every Resolve so far (device records, attributed, re-timed ops, NCCL kernels).
  const TimelineSummary& device_summary() const { return *device_summary_; }

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
  void Clear();
  //! Seconds spent in compute-stream ops of `step`.
  double ComputeSeconds(int64_t step) const;

  //! Collective over `world`: gathers every rank's ops (and device records, when a tracer was
  //! set); on world rank 0 appends them to `tracer` (tracer may be null on other ranks).
  Status GatherInto(Communicator& world, traces::Tracer* tracer) const;

  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;
  ~OpRecorder();

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
  //! Catalogue FLOPs and bytes by [unit][op][phase] (unit 0: outside the layers; 1: a layer of
  //! catalogue.layer's kind; 2 + k: a layer of kind k); flops < 0: no entry.
  struct Tag {
    double flops = -1;
    double bytes = -1;
  };
  static constexpr size_t kOpKinds = static_cast<size_t>(kLastOpKind) + 1;
  static constexpr size_t kPhases = 5;
  bool has_catalogue_ = false;
  Tag tags_[2 + kLayerKinds][kOpKinds][kPhases] = {};
  std::vector<int> layer_kinds_;
  size_t UnitOf(int64_t layer) const {
    if (layer < 0) return 0;
    const auto i = static_cast<size_t>(layer);
    return i < layer_kinds_.size() ? 2 + static_cast<size_t>(layer_kinds_[i]) : 1;
  }
  uint64_t first_key_ = 1;       //!< ops_[i]'s key for the device tracer is first_key_ + i
  size_t device_from_ = 0;      //!< first op not yet matched with device records
  DeviceActivity* activity_ = nullptr;
  std::vector<DeviceSlice> device_slices_;
  std::unique_ptr<TimelineSummary> device_summary_;
  Status ResolveDevice();
  Status GatherDeviceSlices(Communicator& world, traces::Tracer* tracer) const;
  struct Pending {
    size_t op = 0;
    Event begin, end;
  };
  std::vector<Pending> pending_;
};

}  // namespace parallax::executor
