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
  // A measured per-kernel host cost replaces the profile's (a CUDA launch figure); either is host
  // time, shared as the compute is (ComputeModel::set_time_share).
  return compute.measured_launch_overhead_s() > 0 ? compute.measured_launch_overhead_s()
                                                  : impl.launch_overhead_us.value * 1e-6 * compute.time_share();
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
    if (s.flash) {
      // FlashAttention-2's kernels where the profile runs them, at the device's measured fraction of
      // the fused kernel's speed (Microarch::fa2_attention_fraction).
      const double fa2 = impl_.flash_attention_2.value ? c_.traits().fa2_attention_fraction : 1.0;
      o.time_s += c_.FlashAttention(*s.flash) / fa2;
    }
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
    std::vector<bool> overlapped(out.size(), false);
    if (impl_.overlap_tp_comm.value) overlapped = OverlapAsUserbuffers(out);
    if (impl_.async_tp_backward.value || impl_.overlap_tp_comm.value) {
      HideColumnParallelBackward(out, c_.contention_factor(), overlapped);
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
  // Transformer Engine's userbuffers overlap of the sequence-parallel collectives with the layer's
  // linears (Megatron-Core --tp-comm-overlap, which needs sequence parallelism: all-reduces are not
  // overlapped), each by TE's default method and knobs (transformer_engine/pytorch/module/base.py
  // initialize_ub, TE 1.x-2.x; Megatron-Core passes no config of its own):
  //  - ring_exchange (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad: the all-gather before a forward
  //    column-parallel GEMM or a backward row-parallel input-gradient GEMM): the GEMM runs as tp
  //    chunks of m / tp rows, each while the next rank's chunk arrives over peer-to-peer copies
  //    (copy engines, one SM): the chunked GEMM's time, and what of the tp - 1 transfers outlasts the
  //    chunks before them;
  //  - pipeline (proj_fprop, fc2_fprop: the reduce-scatter after a forward row-parallel GEMM): the
  //    GEMM in 4 chunks on the SMs the communication's 16 leave it (set_sm_margin), chunk i's
  //    reduce-scatter under chunk i + 1; the last chunk's stays exposed;
  //  - bulk (qkv_dgrad / fc1_dgrad: the input's re-gather beside the input-gradient GEMMs;
  //    qkv_wgrad / fc1_wgrad: the input gradient's reduce-scatter beside the weight-gradient GEMMs):
  //    the collective on 16 SMs, the GEMMs on the rest (set_sm_margin), hidden up to their length.
  // A collective next to any other op (the LM head's) is left to HideColumnParallelBackward.
  static constexpr int64_t kUbCommSms = 16;      // pipeline and bulk: num_sm
  static constexpr int64_t kUbPipelineSplits = 4;  // pipeline: num_splits (ring_exchange: tp)
  //! Returns which ops it overlapped.
  std::vector<bool> OverlapAsUserbuffers(std::vector<CostedOp>& ops) const {
    std::vector<bool> done(ops.size(), false);
    auto linear = [&](size_t j) {
      if (j >= ops.size() || ops[j].tp_comm || ops[j].gemms.empty()) return false;
      const OpKind op = ops[j].op;
      return op == OpKind::kQkv || op == OpKind::kAttnOut || op == OpKind::kFc1 || op == OpKind::kFc2;
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      CostedOp& comm = ops[i];
      if (!comm.tp_comm || comm.expert_comm || comm.op == OpKind::kTpAllReduce) continue;
      const bool gather = comm.op == OpKind::kTpAllGather;
      const size_t g = gather ? i + 1 : i - 1;  // a gather feeds the next GEMM, a reduce-scatter follows its GEMM
      if ((!gather && i == 0) || !linear(g)) continue;
      CostedOp& gemm = ops[g];
      const bool row = gemm.op == OpKind::kAttnOut || gemm.op == OpKind::kFc2;
      done[i] = true;
      if (gemm.phase != Phase::kBwd && gather && !row) {
        RingExchange(comm, gemm);
      } else if (gemm.phase != Phase::kBwd && !gather && row) {
        Pipeline(comm, gemm);
      } else if (gemm.phase == Phase::kBwd && gather) {
        row ? RingExchange(comm, gemm) : Bulk(comm, gemm, 0);
      } else if (gemm.phase == Phase::kBwd && !row && gemm.gemms.size() > 1) {
        Bulk(comm, gemm, 1);
      } else {
        done[i] = false;
      }
    }
    return done;
  }

  //! `part`'s time run as `splits` chunks of m / splits rows (the chunks' GEMM over the whole's, as
  //! the compute model prices both: wave and tile quantization of the smaller GEMMs).
  double Chunked(const GemmPart& part, int64_t splits) const {
    const int64_t rows = (part.m + splits - 1) / splits;
    const double whole = c_.Gemm(part.m, part.n, part.k, part.batch, part.accumulate);
    if (whole <= 0) return part.time_s;
    return part.time_s * static_cast<double>(splits) * c_.Gemm(rows, part.n, part.k, part.batch, part.accumulate) / whole;
  }
  //! A GEMM on the SMs kUbCommSms leave it: slower by SMs / (SMs - kUbCommSms) (1 without an SM count).
  double SmMargin() const {
    const int64_t sms = c_.traits().sm_count;
    return sms > kUbCommSms ? static_cast<double>(sms) / static_cast<double>(sms - kUbCommSms) : 1.0;
  }
  static void Retime(CostedOp& gemm, size_t part, double t) {
    gemm.time_s += t - gemm.gemms[part].time_s;
    gemm.gemms[part].time_s = t;
  }
  void RingExchange(CostedOp& comm, CostedOp& gemm) const {
    const int64_t tp = std::max<int64_t>(tp_.size, 2);
    const double chunked = Chunked(gemm.gemms[0], tp);
    Retime(gemm, 0, chunked);
    comm.time_s = std::max(0.0, comm.time_s - static_cast<double>(tp - 1) * chunked / static_cast<double>(tp));
  }
  void Pipeline(CostedOp& comm, CostedOp& gemm) const {
    const double chunk = Chunked(gemm.gemms[0], kUbPipelineSplits) * SmMargin() / kUbPipelineSplits;
    const double rs = comm.time_s / kUbPipelineSplits;
    Retime(gemm, 0, chunk * kUbPipelineSplits);
    // Chunk i's reduce-scatter starts when its GEMM and the previous reduce-scatter have ended.
    comm.time_s = rs + (kUbPipelineSplits - 1) * std::max(0.0, rs - chunk);
  }
  void Bulk(CostedOp& comm, CostedOp& gemm, size_t parity) const {
    for (size_t p = parity; p < gemm.gemms.size(); p += 2) Retime(gemm, p, gemm.gemms[p].time_s * SmMargin());
    comm.time_s = std::max(0.0, comm.time_s - GemmTimeOfKind(gemm, parity));
  }

  //! A backward linear's GEMMs of one kind (the catalogue lists them as (input gradient, weight
  //! gradient) pairs): parity 0 the input-gradient GEMMs, 1 the weight-gradient ones.
  static double GemmTimeOfKind(const CostedOp& o, size_t parity) {
    double t = 0;
    for (size_t g = parity; g < o.gemms.size(); g += 2) t += o.gemms[g].time_s;
    return t;
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
  // exposed. The hiding GEMM is slowed by k over the hidden time. Ops in `skip` are overlapped
  // already (OverlapAsUserbuffers).
  static void HideColumnParallelBackward(std::vector<CostedOp>& ops, double k, const std::vector<bool>& skip) {
    auto column_parallel = [&](size_t j) {
      const OpKind op = ops[j].op;
      return !ops[j].tp_comm && ops[j].phase == Phase::kBwd &&
             (op == OpKind::kQkv || op == OpKind::kFc1 || op == OpKind::kLmHead);
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!ops[i].tp_comm || ops[i].expert_comm || ops[i].phase != Phase::kBwd || skip[i]) continue;
      size_t g = ops.size();
      double under = 0;
      if (ops[i].op == OpKind::kTpAllGather) {
        if (i + 1 < ops.size() && column_parallel(i + 1)) {
          g = i + 1;
          under = GemmTimeOfKind(ops[g], 0);  // the input-gradient GEMMs
        }
      } else if (i > 0 && column_parallel(i - 1)) {
        g = i - 1;
        under = GemmTimeOfKind(ops[g], 1);  // the weight-gradient GEMMs
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
  k.selective_modules = key.selective_modules;
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
  u.layers = model.layers;
  if (!cat.mtp.fwd.empty()) price(cat.mtp, u.mtp);
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
  const CpPricing cp{.collectives = collectives,
                     .cp_group = cp_group,
                     .type = impl.cp_comm_type.value,
                     .contention = compute.contention_factor(),
                     .element_bytes = static_cast<double>(compute.element_bytes())};
  u.cp = PriceContextParallel(u.layer, model, key, cp);
  // Every other unit with an attention core: each layer kind, and the MTP module's layer.
  for (UnitOps& other : u.kinds) {
    if (!other.fwd.empty()) PriceContextParallel(other, model, key, cp);
  }
  if (!u.mtp.fwd.empty()) PriceContextParallel(u.mtp, model, key, cp);
  return u;
}

}  // namespace parallax::planner
