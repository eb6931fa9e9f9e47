#pragma once
// The ops of one transformer layer, the embedding and the LM head for one micro-batch, each
// costed (compute model + TP collectives). One list, two users: the closed form sums it, the
// simulator schedules it op by op and names trace slices after it (OpKind / Phase of
// model/op_identity.h). The ops themselves (shapes, FLOPs, bytes, kernels) are the op catalogue's
// (model/op_catalogue.h); this file only prices them.

#include <array>
#include <cstdint>
#include <vector>

#include "model/implementation.h"
#include "model/op_identity.h"
#include "model/plan.h"
#include "planner/cost/collective.h"
#include "planner/cost/compute.h"

namespace parallax::planner {

//! One GEMM of an op as it was priced: the shape `refine` turns a measured time into a sample at.
struct GemmPart {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  double time_s = 0;
  bool accumulate = false;  //!< GemmShape::accumulate: adds into the fp32 gradient buffer
};

struct CostedOp {
  OpKind op = OpKind::kQkv;
  Phase phase = Phase::kFwd;
  double time_s = 0;
  double flops = 0;      //!< floating-point work (GEMMs); 0 for memory-bound ops and comm
  double bytes = 0;      //!< bytes moved (memory-bound) or message size (comm)
  bool tp_comm = false;  //!< a TP collective (or an MoE layer's ep / etp one): on the critical path, on the tp-comm track
  bool expert_comm = false;  //!< over an MoE layer's ep or etp group: TP overlap does not hide it
  std::vector<GemmPart> gemms{};         //!< the op's GEMMs (empty for memory-bound ops and comm)
  const char* memory_family = nullptr;   //!< CostDb kernel family of its memory-bound part (`bytes`)
  double memory_time_s = 0;              //!< time of that part
  //! The part of time_s that is system noise (NoiseModel): a compute op's mean detour (negative
  //! when a refined run's op times sat below their medians), a TP
  //! collective's wait for the latest rank of its group. Not a cost of the op's work: refine
  //! compares measured medians with time_s - noise_s.
  double noise_s = 0;
  //! The part of time_s that is the executor's host time between this op and the one before it
  //! (CostDb::op_gap_us, measured by refine; 0 without one). Not the op's work either.
  double gap_s = 0;
  int64_t kernels = 0;  //!< kernel calls (OpSpec::kernels; 0 for comm)
  //! The part of time_s that the launch floor adds above the work (an op costs at least kernels x
  //! the host launch overhead). Not the op's work: refine shares a measured time among the work's
  //! GEMMs and memory-bound parts, never this.
  double launch_floor_s = 0;
};

//! The CostDb kernel family of an op's memory-bound part: the OpKind name for forward and
//! recompute, "<name>_bwd" for backward (a backward kernel moves other bytes at another speed
//! than its forward: a norm's backward reads four tensors where its forward reads two).
//! ComputeModel::MemoryBound falls back to the forward family, then "elementwise".
const char* MemoryFamily(OpKind op, Phase phase);
//! The family of a whole unfused attention op (QK^T, masked softmax, AV as the backend runs them
//! in one call), keyed by the op's score bytes; when the CostDb measured it, it prices attn_core
//! on its own instead of two batched GEMMs plus a softmax.
const char* AttentionFamily(Phase phase);

//! One micro-batch through one unit (a layer, the embedding or the head), forward and backward.
//! `bwd` starts with the recompute ops (phase kRecompute) when recompute is on.
struct UnitOps {
  std::vector<CostedOp> fwd;
  std::vector<CostedOp> bwd;
  double fwd_s = 0, bwd_s = 0;        //!< sums of time_s
  double fwd_tp_s = 0, bwd_tp_s = 0;  //!< the TP-collective part of the sums
  double fwd_flops = 0, bwd_flops = 0;
  //! The sequence-parallel gradient all-reduces (UnitOpSpecs::grad_sync), priced one by one, and
  //! their sum and bytes; not part of fwd/bwd (they run once per step, or per micro-batch under
  //! ZeRO-2/3, per the profile's sp_grad_reduction).
  std::vector<CostedOp> grad_sync;
  double grad_sync_s = 0, grad_sync_bytes = 0;
  void Finish();                      //!< fills the sums from the lists
};

//! What the per-unit costs depend on (not dp, pp, ZeRO or schedule).
struct UnitKey {
  int64_t tp = 1;
  int64_t cp = 1;  //!< context parallel: the ops run s / cp tokens (planner/cost/cp_costs.h)
  int64_t micro_batch = 1;
  int64_t seq_len = 0;  //!< the whole sequence (a cp rank holds seq_len / cp of it)
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  uint32_t selective_modules = kRecomputeCoreAttn;  //!< with recompute selective (Layout::selective_modules)
  int64_t ep = 1, etp = 1;  //!< an MoE layer's expert groups (Layout ep, expert_tp)
  Routing routing;
  bool operator==(const UnitKey&) const = default;
};

//! The placed groups an MoE layer's collectives run over (model/op_catalogue.h CommGroup).
struct ExpertGroups {
  PlacedGroup ep, etp;
};

//! Context parallelism's exchanges in one layer, one micro-batch (planner/cost/cp_costs.h):
//! exposed seconds and bytes each rank moves, forward and backward (recompute included in the
//! forward figures).
struct CpExchange {
  double fwd_exposed_s = 0, bwd_exposed_s = 0;
  double fwd_bytes = 0, bwd_bytes = 0;
};

struct UnitCosts {
  //! Layer 0's kind: every layer's in a dense model with global attention; for the closed form's
  //! per-layer terms (a pipeline's last backward layer, a DP bucket's overlap) the representative layer.
  UnitOps layer;
  //! Each layer kind's ops (model/op_catalogue.h LayerKindOf), and each layer's kind; both empty when
  //! every layer is alike (then `layer` serves all).
  std::vector<UnitOps> kinds;
  std::vector<int> layer_kind;
  int64_t layers = 0;  //!< the model's decoder layers; indices from there on are MTP modules
  //! Layer i's ops; a multi-token-prediction module's (`mtp`) for i >= layers (layers + k: module k,
  //! the index its parameter groups and trace ops carry).
  const UnitOps& Layer(int64_t i) const {
    if (i >= layers && layers > 0) return mtp.fwd.empty() ? layer : mtp;
    return layer_kind.empty() ? layer : kinds[static_cast<size_t>(layer_kind[static_cast<size_t>(i)])];
  }
  UnitOps embedding;  //!< first stage
  UnitOps head;       //!< last stage: final norm, LM head, loss
  //! One multi-token-prediction module (OpCatalogue::mtp): its embedding lookup, own ops, layer and
  //! head; empty without them.
  UnitOps mtp;
  CpExchange cp;      //!< folded into layer's attention core ops; zero without cp
};

//! The host launch overhead per kernel call that an op's launch floor uses, seconds: the cost
//! database's measurement (CostDb::launch_overhead_us), else the profile's figure.
double LaunchOverhead(const ComputeModel& compute, const ImplementationProfile& impl);

//! Costs every unit of `model` for `key` as `impl` runs it; `tp_group` and `cp_group` are the
//! placed TP and CP groups. `fp8` non-null: the fp8 precision, whose linear layers' GEMMs it
//! prices (OpShapeKey::fp8_linear). The ops, shapes, FLOPs and bytes come from the op catalogue
//! (model/op_catalogue.h) at seq_len / cp tokens; each op costs max(GPU time, kernels x the
//! profile's host launch overhead) (a host-bound floor); cp > 1 then prices the attention core as
//! planner/cost/cp_costs.h says. `experts`: where an MoE layer's ep and etp groups sit (unused for
//! a dense model).
UnitCosts BuildUnitCosts(const ModelSpec& model, const UnitKey& key, const ComputeModel& compute,
                         const CollectiveModel& collectives, const PlacedGroup& tp_group,
                         const PlacedGroup& cp_group, const ImplementationProfile& impl,
                         const ComputeModel* fp8 = nullptr, const ExpertGroups& experts = {});

}  // namespace parallax::planner
