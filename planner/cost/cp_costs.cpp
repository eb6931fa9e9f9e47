#include "planner/cost/cp_costs.h"

#include <algorithm>

namespace parallax::planner {
namespace {

//! Bytes of the exchanges of one attention for `type`, forward and backward.
struct ExchangeBytes {
  double kv_block = 0;  //!< this rank's K and V: 2 x micro_batch x s/cp x kv heads per tp rank x head_dim
  double q_block = 0;   //!< its Q (and the output O, the same size)
  double a2a_kv = 0;    //!< its K and V as an all-to-all sends them (kv heads replicated to tp*cp)
};

ExchangeBytes BytesOf(const ModelSpec& m, const UnitKey& key, double element_bytes) {
  // s / cp and heads / tp divide exactly (ValidateLayout).
  const double tokens =
      static_cast<double>(key.micro_batch) * static_cast<double>(key.seq_len) / static_cast<double>(key.cp);
  const double d = static_cast<double>(m.head_dim());
  const double kv_heads = static_cast<double>(m.kv_heads) / static_cast<double>(key.tp);
  ExchangeBytes b;
  b.kv_block = 2.0 * tokens * kv_heads * d * element_bytes;
  b.q_block = tokens * static_cast<double>(m.heads) / static_cast<double>(key.tp) * d * element_bytes;
  b.a2a_kv = 2.0 * tokens * std::max(kv_heads, static_cast<double>(key.cp)) * d * element_bytes;
  return b;
}

//! One attention pass (forward, recompute or backward) of cp blocks of `block_s` each, with the
//! exchanges of p.type; returns its time and adds the exposed part and the bytes to `x`.
double CpAttention(double block_s, bool backward, int64_t cp, const ExchangeBytes& b, const CpPricing& p,
                   CpExchange& x) {
  const double steps = static_cast<double>(cp - 1);
  double& exposed_s = backward ? x.bwd_exposed_s : x.fwd_exposed_s;
  double& bytes = backward ? x.bwd_bytes : x.fwd_bytes;
  const CollectiveModel& coll = p.collectives;
  switch (p.type) {
    case CpCommType::kP2p: {
      // Backward circulates K, V and the partial dK, dV (TE AttnFuncWithCPAndKVP2P.backward).
      const double step_bytes = backward ? 2.0 * b.kv_block : b.kv_block;
      const double t = CpRingStepTime(coll, p.cp_group, step_bytes);
      const double hidden = std::min(block_s, t);
      const double exposed = std::max(0.0, t - block_s);
      exposed_s += steps * exposed;
      bytes += steps * step_bytes;
      return block_s + steps * (block_s + (p.contention - 1) * hidden + exposed);
    }
    case CpCommType::kAllGather: {
      const double gathered = static_cast<double>(cp) * b.kv_block;  // nccl-tests size: the whole output
      double t = coll.Time(CollectiveKind::kAllGather, gathered, p.cp_group);
      if (backward) t += coll.Time(CollectiveKind::kReduceScatter, gathered, p.cp_group);
      exposed_s += t;
      bytes += backward ? 2.0 * gathered : gathered;
      return static_cast<double>(cp) * block_s + t;
    }
    case CpCommType::kA2a: {
      // Forward: Q, K, V in, the output back; backward: dO in, dQ, dK, dV back.
      const double qkv = b.q_block + b.a2a_kv;
      const double t = coll.Time(CollectiveKind::kAllToAll, qkv, p.cp_group) +
                       coll.Time(CollectiveKind::kAllToAll, b.q_block, p.cp_group);
      exposed_s += t;
      bytes += qkv + b.q_block;
      return static_cast<double>(cp) * block_s + t;
    }
    case CpCommType::kNone:
    case CpCommType::kA2aP2p: break;  // rejected by CpCommTypeProblem
  }
  return static_cast<double>(cp) * block_s;
}

}  // namespace

double CpRingStepTime(const CollectiveModel& collectives, const PlacedGroup& cp_group, double bytes) {
  PlacedGroup hop;
  hop.size = 2;
  hop.gpus_per_node = cp_group.gpus_per_node;
  if (!cp_group.spans_nodes()) {
    hop.ranks_per_node = 2;
    hop.nodes = 1;
    return collectives.Time(CollectiveKind::kSendRecv, bytes, hop);
  }
  // The ring leaves each node once per cp group: gpus_per_node / ranks_per_node senders share the
  // node's NICs, where the send/recv model gives each of gpus_per_node GPUs its 1/gpus_per_node.
  hop.ranks_per_node = 1;
  hop.nodes = 2;
  return collectives.Time(CollectiveKind::kSendRecv, bytes / static_cast<double>(std::max<int64_t>(cp_group.ranks_per_node, 1)),
                          hop);
}

CpExchange PriceContextParallel(UnitOps& layer, const ModelSpec& m, const UnitKey& key, const CpPricing& p) {
  CpExchange out;
  if (key.cp <= 1) return out;
  const ExchangeBytes b = BytesOf(m, key, p.element_bytes);
  for (std::vector<CostedOp>* ops : {&layer.fwd, &layer.bwd}) {
    for (CostedOp& o : *ops) {
      if (o.op != OpKind::kAttnCore) continue;
      const double block = o.time_s - o.gap_s;
      o.time_s = CpAttention(block, o.phase == Phase::kBwd, key.cp, b, p, out) + o.gap_s;
      o.flops *= static_cast<double>(key.cp);
      o.noise_s *= static_cast<double>(key.cp);
      o.launch_floor_s *= static_cast<double>(key.cp);  // each block's kernels are launched
      o.kernels *= key.cp;
    }
  }
  layer.Finish();
  return out;
}

}  // namespace parallax::planner
