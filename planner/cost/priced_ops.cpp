#include "planner/cost/priced_ops.h"

#include "planner/memory/memory_model.h"

namespace parallax::planner {
namespace {

const std::vector<CostedOp>* ListFor(const UnitOps& u, Phase phase) {
  if (phase == Phase::kFwd) return &u.fwd;
  if (phase == Phase::kBwd || phase == Phase::kRecompute) return &u.bwd;
  return nullptr;
}

// A TP or DP collective measured at the size the predicted slice carries, over its group.
OpDescription CollectiveAt(CollectiveKind kind, int64_t predicted_bytes, const PlacedGroup& group) {
  OpDescription out;
  if (predicted_bytes <= 0) {
    out.not_sampled = "the predicted slice carries no message size (a reduction of several buckets)";
    return out;
  }
  CollectiveDescription c;
  c.kind = kind;
  c.bytes = predicted_bytes;
  c.group = group;
  out.collective = c;
  return out;
}

}  // namespace

PricedOps::PricedOps(const Plan& plan, const CostDb* db)
    : plan_(plan), ctx_(plan.cluster, plan.training.precision, db, &plan_.implementation) {
  const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : plan.model.seq_len;
  units_ = &ctx_.Units(plan.model, plan.layout, seq);
}

std::optional<ComputeDescription> PricedOps::FromCostedOp(const OpIdentity& id) const {
  const UnitOps* unit = id.layer >= 0 ? &units_->Layer(id.layer) : nullptr;  // its kind's ops, or an MTP module's
  if (id.layer < 0) {
    if (id.op == OpKind::kEmbedding) {
      unit = &units_->embedding;
    } else if (id.op == OpKind::kFinalNorm || id.op == OpKind::kLmHead || id.op == OpKind::kLoss) {
      unit = &units_->head;
    } else {
      return std::nullopt;
    }
  }
  const auto* list = ListFor(*unit, id.phase);
  if (list == nullptr) return std::nullopt;
  for (const CostedOp& o : *list) {
    if (o.op != id.op || o.phase != id.phase || o.tp_comm) continue;
    ComputeDescription d;
    d.gemms = o.gemms;
    if (o.memory_family != nullptr && o.bytes > 0) {
      d.memory.push_back({o.memory_family, static_cast<int64_t>(o.bytes), o.memory_time_s});
    }
    // The work: measured medians carry no mean detour, no gap, and the floor is not a part to share.
    d.time_s = o.time_s - o.noise_s - o.gap_s - o.launch_floor_s;
    d.kernels = o.kernels;
    return d;
  }
  return std::nullopt;
}

ComputeDescription PricedOps::Optimizer(int64_t pp_rank) const {
  // As planner/cost/plan_costs.cpp prices the optimizer op: AdamW over the rank's shard, with the
  // profile's per-parameter bytes (OptimizerBytesPerParam). The grad-norm read is the
  // grad_clip op's (not sampled: its slice also waits in the all-reduce).
  const Layout& l = plan_.layout;
  const double params = static_cast<double>(RankParams(plan_.model, l, pp_rank));
  const double shard = params / static_cast<double>(l.zero_stage >= 1 ? l.dp * l.cp : 1);
  const double bytes = OptimizerBytesPerParam(plan_.implementation, plan_.training.precision, l.zero_stage) * shard;
  ComputeDescription d;
  const auto& c = ctx_.compute();
  d.memory.push_back({"optimizer", static_cast<int64_t>(bytes), c.MemoryBound("optimizer", bytes)});
  d.time_s = d.memory[0].time_s;
  return d;
}

OpDescription PricedOps::Describe(const OpIdentity& id, int64_t predicted_bytes) const {
  OpDescription out;
  const Layout& l = plan_.layout;
  switch (id.op) {
    case OpKind::kTpAllReduce:
    case OpKind::kTpAllGather:
    case OpKind::kTpReduceScatter:
      return CollectiveAt(id.op == OpKind::kTpAllReduce   ? CollectiveKind::kAllReduce
                          : id.op == OpKind::kTpAllGather ? CollectiveKind::kAllGather
                                                          : CollectiveKind::kReduceScatter,
                          predicted_bytes, PlaceGroup(l, plan_.cluster, GroupKind::kTp));
    case OpKind::kPpSend: {
      if (l.tp > 1 && !l.sequence_parallel) {
        out.not_sampled = "the planner prices the send together with a TP all-gather (Megatron scatter/gather)";
        return out;
      }
      const int64_t seq = plan_.training.seq_len > 0 ? plan_.training.seq_len : plan_.model.seq_len;
      const int64_t local_seq = seq / l.cp;  // a cp rank's tokens of each sequence
      const double e = static_cast<double>(ctx_.compute().element_bytes());
      const int64_t pp_rank = id.stage % l.pp;
      const int64_t peer = id.phase == Phase::kBwd ? (pp_rank - 1 + l.pp) % l.pp : (pp_rank + 1) % l.pp;
      CollectiveDescription c;
      c.kind = CollectiveKind::kSendRecv;
      c.bytes = static_cast<int64_t>(e * static_cast<double>(l.micro_batch * local_seq * plan_.model.hidden) /
                                     static_cast<double>(l.tp));
      c.group = PlacePipelineHop(l, plan_.cluster, pp_rank, peer);
      out.collective = c;
      return out;
    }
    case OpKind::kPpRecv:
      out.not_sampled = "a receive's time includes waiting for the sender (pipeline bubble)";
      return out;
    case OpKind::kDpAllReduce:
    case OpKind::kDpReduceScatter:
    case OpKind::kDpAllGather:
      // One bucket over the dp x cp group (the tied embedding's first-last all-reduce carries no size):
      // the in-run time of the collective, from when the rank issued it to when every part arrived.
      return CollectiveAt(id.op == OpKind::kDpAllReduce   ? CollectiveKind::kAllReduce
                          : id.op == OpKind::kDpAllGather ? CollectiveKind::kAllGather
                                                          : CollectiveKind::kReduceScatter,
                          predicted_bytes, PlaceReduction(l, plan_.cluster, ReducedOver(ParamGroupKind::kLayer)));
    case OpKind::kCpSendRecv:
      out.not_sampled = "the planner prices the cp ring's K/V exchange inside the attention core "
                        "(planner/cost/cp_costs.cpp), not as an op of its own";
      return out;
    case OpKind::kGradClip:
      out.not_sampled = "the measured slice is the grad-norm read plus the world all-reduce, waiting for the "
                        "slowest rank included";
      return out;
    case OpKind::kOptimizer:
      out.compute = Optimizer(CoordsOf(l, id.rank).pp_idx);
      return out;
    case OpKind::kGradZero:
    case OpKind::kShardCopy:
    case OpKind::kGradFold:
    case OpKind::kGradAccum: {
      // A memory pass (IsMemoryPass: the ZeRO bookkeeping, planner/cost/plan_costs.h ZeroPasses, and
      // the gradient accumulation pass): a sample of its own kernel family at the bytes the
      // predicted op carries.
      if (predicted_bytes <= 0) {
        out.not_sampled = "the predicted pass carries no byte count";
        return out;
      }
      ComputeDescription d;
      const char* family = MemoryFamily(id.op, Phase::kComm);
      const double t = ctx_.compute().MemoryBound(family, static_cast<double>(predicted_bytes));
      d.memory.push_back({family, predicted_bytes, t});
      d.time_s = t;
      out.compute = d;
      return out;
    }
    default: break;
  }
  out.compute = FromCostedOp(id);
  if (!out.compute) out.not_sampled = "the planner has no costed op for this identity";
  return out;
}

}  // namespace parallax::planner
