#include "planner/cost/layer_ops.h"

#include <algorithm>
#include <string>
#include <utility>

#include "model/op_catalogue.h"
#include "planner/cost/cp_costs.h"
#include "planner/cost/moe_costs.h"

namespace parallax::planner {

void UnitOps::Finish() {
  fwd_s = bwd_s = fwd_tp_s = bwd_tp_s = fwd_flops = bwd_flops = 0;
  for (const auto& o : fwd) {
    fwd_s += o.time_s;
    fwd_flops += o.flops;
    if (o.tp_comm) fwd_tp_s += o.time_s;
  }
  for (const auto& o : bwd) {
    bwd_s += o.time_s;
    bwd_flops += o.flops;
    if (o.tp_comm) bwd_tp_s += o.time_s;
  }
  grad_sync_s = grad_sync_bytes = 0;
  for (const auto& o : grad_sync) {
    grad_sync_s += o.time_s;
    grad_sync_bytes += o.bytes;
  }
}

const char* MemoryFamily(OpKind op, Phase phase) {
  // Stable strings for CostedOp::memory_family: one per (op, backward or not).
  static const auto* names = [] {
    auto* n = new std::vector<std::string>;  // NOLINT: immortal name table
    for (int k = 0; k <= static_cast<int>(kLastOpKind); ++k) {
      n->push_back(ToString(static_cast<OpKind>(k)));
      n->push_back(std::string(ToString(static_cast<OpKind>(k))) + "_bwd");
    }
    return n;
  }();
  return (*names)[2 * static_cast<size_t>(op) + (phase == Phase::kBwd ? 1 : 0)].c_str();
}

const char* AttentionFamily(Phase phase) { return phase == Phase::kBwd ? "attention_bwd" : "attention"; }

double LaunchOverhead(const ComputeModel& compute, const ImplementationProfile& impl) {
  // A measured per-kernel host cost replaces the profile's (a CUDA launch figure).
  return compute.measured_launch_overhead_s() > 0 ? compute.measured_launch_overhead_s()
                                                  : impl.launch_overhead_us.value * 1e-6;
}

namespace {

class Pricer {
 public:
  Pricer(const ComputeModel& c, const ComputeModel& fp8, const CollectiveModel& coll, const PlacedGroup& tp,
         const ImplementationProfile& impl, const ExpertGroups& experts, const ModelSpec& model)
      : c_(c), fp8_(fp8), coll_(coll), tp_(tp), impl_(impl), experts_(experts), model_(model) {
    launch_s_ = LaunchOverhead(c, impl);
    gap_s_ = c.measured_op_gap_s();
  }

  CostedOp Price(const OpSpec& s) const {
    CostedOp o;
    o.op = s.op;
    o.phase = s.phase;
    o.bytes = s.bytes;
    if (s.tp_collective) {
      const PlacedGroup& g = s.group == CommGroup::kEp ? experts_.ep : s.group == CommGroup::kEtp ? experts_.etp : tp_;
      o.time_s = coll_.Time(*s.tp_collective, s.bytes, g);
      const bool dispatch = s.op == OpKind::kMoeDispatch || s.op == OpKind::kMoeCombine;
      if (dispatch && impl_.moe_dispatcher.value == MoeDispatcher::kDeepEp && model_.experts_per_token > 0) {
        o.time_s = DeepEpDispatchTime(coll_, s.bytes / static_cast<double>(model_.experts_per_token),
                                      model_.experts_per_token, model_.experts, g);
      }
      o.expert_comm = s.group != CommGroup::kTp;
      o.tp_comm = true;
      return o;
    }
    if (s.op == OpKind::kAttnCore && !s.flash && s.bytes > 0 && c_.HasKernelFamily(AttentionFamily(s.phase))) {
      // Measured as the backend runs it (one attention call), not as its parts.
      o.memory_family = AttentionFamily(s.phase);
      o.memory_time_s = c_.MemoryBound(o.memory_family, s.bytes);
      o.time_s = o.memory_time_s;
      o.flops = s.executed_flops;
      ApplyLaunchFloor(o, s.kernels);
      return o;
    }
    // An unfused attention core's passes over the s x s scores (ComputeModel::ScoreGemm).
    const bool scores = s.op == OpKind::kAttnCore && !s.flash;
    const bool bwd = s.phase == Phase::kBwd;
    for (const GemmShape& g : s.gemms) {
      GemmPart part{static_cast<int64_t>(g.m), static_cast<int64_t>(g.n), static_cast<int64_t>(g.k),
                    static_cast<int64_t>(g.batch)};
      part.accumulate = g.accumulate;
      const ComputeModel& gemm_model = g.fp8 ? fp8_ : c_;
      part.time_s = scores ? c_.ScoreGemm(g.m, g.n, g.k, g.batch) : gemm_model.Gemm(g.m, g.n, g.k, g.batch, g.accumulate);
      o.time_s += part.time_s;
      o.gemms.push_back(part);  // refine samples measured times at these shapes
    }
    if (s.flash) o.time_s += c_.FlashAttention(*s.flash);
    // Memory-bound part: the op's own family (an OpKind name), as CostDb kernels are keyed.
    if (s.bytes > 0 && !s.flash) {
      o.memory_family = MemoryFamily(s.op, s.phase);
      o.memory_time_s = scores ? c_.ScoreMemory(o.memory_family, s.bytes, bwd) : c_.MemoryBound(o.memory_family, s.bytes);
      o.time_s += o.memory_time_s;
    }
    o.flops = s.gemms.empty() && !s.flash ? 0 : s.executed_flops;
    ApplyLaunchFloor(o, s.kernels);
    return o;
  }

  //! A host-bound op: its `kernels` launches take at least kernels x the launch overhead.
  void ApplyLaunchFloor(CostedOp& o, int64_t kernels) const {
    o.kernels = kernels;
    const double floored = std::max(o.time_s, static_cast<double>(kernels) * launch_s_);
    o.launch_floor_s = floored - o.time_s;
    o.time_s = floored;
  }

  std::vector<CostedOp> PriceAll(const std::vector<OpSpec>& specs) const {
    std::vector<CostedOp> out;
    out.reserve(specs.size());
    for (const OpSpec& s : specs) out.push_back(Price(s));
    if (impl_.moe_shared_expert_overlap.value) HideDispatchBehindSharedExperts(out, c_.contention_factor());
    if (impl_.overlap_tp_comm.value) {
      HideTpBehindGemms(out, c_.contention_factor());
    } else if (impl_.async_tp_backward.value) {
      HideColumnParallelBackward(out, c_.contention_factor());
    }
    AddNoise(out);
    // The device waits for the host between two ops (refine measures it on the executor's trace).
    for (CostedOp& o : out) {
      if (o.tp_comm) continue;
      o.gap_s = gap_s_;
      o.time_s += gap_s_;
    }
    return out;
  }

 private:
  // Overlapped TP communication (Transformer Engine userbuffers): a TP collective runs in chunks
  // under the GEMM that consumes or produces it; only what the neighbouring GEMM cannot hide stays
  // on the critical path. The GEMM it hides behind runs on fewer SMs meanwhile: slowed by the
  // contention factor k over the overlapped time, as DP overlap is (DESIGN.md "Overlap").
  static void HideTpBehindGemms(std::vector<CostedOp>& ops, double k) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!ops[i].tp_comm || ops[i].expert_comm) continue;
      size_t g = ops.size();
      if (i + 1 < ops.size() && !ops[i + 1].tp_comm && ops[i + 1].flops > 0) g = i + 1;
      if (i > 0 && !ops[i - 1].tp_comm && ops[i - 1].flops > 0 &&
          (g == ops.size() || ops[i - 1].time_s > ops[g].time_s)) {
        g = i - 1;
      }
      if (g == ops.size()) continue;
      const double hidden = std::min(ops[i].time_s, ops[g].time_s);
      ops[i].time_s -= hidden;
      ops[g].time_s += (k - 1) * hidden;
    }
  }

  // Megatron-Core's --moe-shared-expert-overlap: the shared experts (an MoE layer's fc1 / fc2) run on
  // their own stream while the dispatch and combine all-to-alls are in flight; each all-to-all hides
  // under the shared-expert GEMMs of its pass not yet used to hide another, slowed by k meanwhile.
  static void HideDispatchBehindSharedExperts(std::vector<CostedOp>& ops, double k) {
    for (Phase ph : {Phase::kFwd, Phase::kBwd, Phase::kRecompute}) {
      double shared = 0;
      for (const CostedOp& o : ops) {
        if (o.phase == ph && (o.op == OpKind::kFc1 || o.op == OpKind::kFc2)) shared += o.time_s;
      }
      for (CostedOp& o : ops) {
        if (o.phase != ph || (o.op != OpKind::kMoeDispatch && o.op != OpKind::kMoeCombine)) continue;
        const double hidden = std::min(o.time_s, shared);
        o.time_s -= hidden;
        shared -= hidden;
        for (CostedOp& g : ops) {
          if (g.phase == ph && g.op == OpKind::kFc1) {
            g.time_s += (k - 1) * hidden;
            break;
          }
        }
      }
    }
  }

  // Megatron-LM's asynchronous column-parallel backward (ImplementationProfile::async_tp_backward):
  // the backward of qkv, fc1 and the LM head (column-parallel linears) computes the input gradient,
  // then the weight gradient; the input-gradient all-reduce (sequence parallel: reduce-scatter) that
  // follows the op runs under its weight-gradient GEMMs, the sequence-parallel re-gather of the
  // input that precedes it (qkv, fc1: the catalogue's head keeps its gathered input) under its
  // input-gradient GEMMs (the catalogue lists a backward linear's GEMMs as (input gradient, weight
  // gradient) pairs). The row-parallel linears' backward gather and every forward collective stay
  // exposed. The hiding GEMM is slowed by k over the hidden time.
  static void HideColumnParallelBackward(std::vector<CostedOp>& ops, double k) {
    auto column_parallel = [&](size_t j) {
      const OpKind op = ops[j].op;
      return !ops[j].tp_comm && ops[j].phase == Phase::kBwd &&
             (op == OpKind::kQkv || op == OpKind::kFc1 || op == OpKind::kLmHead);
    };
    auto gemm_time = [](const CostedOp& o, size_t parity) {
      double t = 0;
      for (size_t g = parity; g < o.gemms.size(); g += 2) t += o.gemms[g].time_s;
      return t;
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!ops[i].tp_comm || ops[i].expert_comm || ops[i].phase != Phase::kBwd) continue;
      size_t g = ops.size();
      double under = 0;
      if (ops[i].op == OpKind::kTpAllGather) {
        if (i + 1 < ops.size() && column_parallel(i + 1)) {
          g = i + 1;
          under = gemm_time(ops[g], 0);  // the input-gradient GEMMs
        }
      } else if (i > 0 && column_parallel(i - 1)) {
        g = i - 1;
        under = gemm_time(ops[g], 1);  // the weight-gradient GEMMs
      }
      if (g == ops.size()) continue;
      const double hidden = std::min(ops[i].time_s, under);
      ops[i].time_s -= hidden;
      ops[g].time_s += (k - 1) * hidden;
    }
  }

  // System noise (planner/cost/noise.h): each compute op runs its mean excess longer; each TP
  // collective waits for the latest rank of its group, which computed since the previous one
  // (the list read as a cycle: layers repeat, so the first collective follows the last's tail).
  void AddNoise(std::vector<CostedOp>& ops) const {
    const NoiseModel& n = c_.noise();
    if (!n.measured()) return;
    // The compute after the last collective precedes the first one.
    double tail = 0;
    for (const CostedOp& o : ops) tail = o.tp_comm ? 0 : tail + o.time_s;
    double since = tail;
    for (CostedOp& o : ops) {
      if (o.tp_comm) {
        o.noise_s = n.SyncExcess(since, tp_.size);
        since = 0;
      } else {
        since += o.time_s;
        o.noise_s = n.MeanExcess(o.time_s);
      }
      o.time_s += o.noise_s;
    }
  }

  const ComputeModel& c_;
  const ComputeModel& fp8_;  //!< prices GemmShape::fp8 GEMMs
  const CollectiveModel& coll_;
  const PlacedGroup& tp_;
  const ImplementationProfile& impl_;
  const ExpertGroups& experts_;
  const ModelSpec& model_;  //!< an MoE layer's top-k and expert count (DeepEP's dispatch)
  double launch_s_ = 0;
  double gap_s_ = 0;
};

}  // namespace

UnitCosts BuildUnitCosts(const ModelSpec& model, const UnitKey& key, const ComputeModel& compute,
                         const CollectiveModel& collectives, const PlacedGroup& tp_group,
                         const PlacedGroup& cp_group, const ImplementationProfile& impl,
                         const ComputeModel* fp8, const ExpertGroups& experts) {
  OpShapeKey k;
  k.micro_batch = key.micro_batch;
  k.seq_len = key.seq_len / key.cp;
  k.tp = key.tp;
  k.sequence_parallel = key.sequence_parallel;
  k.recompute = key.recompute;
  k.element_bytes = compute.element_bytes();
  k.ep = key.ep;
  k.etp = key.etp;
  k.expert_load = key.routing.LoadFactor();
  k.dispatcher = impl.moe_dispatcher.value;
  k.fp8_linear = fp8 != nullptr;
  const OpCatalogue cat = BuildOpCatalogue(model, k, impl);
  const Pricer p(compute, fp8 != nullptr ? *fp8 : compute, collectives, tp_group, impl, experts, model);
  UnitCosts u;
  auto price = [&](const UnitOpSpecs& specs, UnitOps& out) {
    out.fwd = p.PriceAll(specs.fwd);
    out.bwd = p.PriceAll(specs.bwd);
    out.grad_sync = p.PriceAll(specs.grad_sync);
    out.Finish();
  };
  price(cat.layer, u.layer);
  price(cat.embedding, u.embedding);
  price(cat.head, u.head);
  // Layers of more than one kind (MoE and dense, local and global attention): each kind priced.
  bool uniform = true;
  for (int64_t i = 0; i < model.layers; ++i) uniform = uniform && LayerKindOf(model, i) == LayerKindOf(model, 0);
  if (!uniform) {
    u.kinds.resize(cat.kinds.size());
    for (size_t i = 0; i < cat.kinds.size(); ++i) {
      if (!cat.kinds[i].fwd.empty()) price(cat.kinds[i], u.kinds[i]);
    }
    for (int64_t i = 0; i < model.layers; ++i) u.layer_kind.push_back(LayerKindOf(model, i));
  }
  u.cp = PriceContextParallel(u.layer, model, key,
                              CpPricing{.collectives = collectives,
                                        .cp_group = cp_group,
                                        .type = impl.cp_comm_type.value,
                                        .contention = compute.contention_factor(),
                                        .element_bytes = static_cast<double>(compute.element_bytes())});
  return u;
}

}  // namespace parallax::planner
