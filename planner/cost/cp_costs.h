#pragma once
// Context parallelism in a layer's ops (DESIGN.md "Context parallelism"). The op catalogue is
// built at the cp rank's s / cp tokens: every op but the attention core then costs what one cp
// rank runs (sequence parallel splits those tokens over tp, as Megatron-Core does). The attention
// core is Megatron-Core's causal load-balanced one (Transformer Engine AttnFuncWithCPAndKVP2P):
// the sequence is cut into 2 cp chunks and rank i holds chunks i and 2cp-1-i, so every rank does
// 1/cp of the causal work, s^2 / (2 cp) query-key pairs per head. With c = s / (2 cp), it runs cp
// blocks of 2 c^2 pairs each: its own two chunks causally, then per received K/V block either all
// of its queries against the block's first chunk or its second chunk against the whole block. A
// block costs the catalogue's causal attention of its s / cp tokens (the same 2 c^2 pairs), so the
// core costs cp times that. How K and V reach the blocks is the profile's cp_comm_type:
//   p2p (Megatron-Core's default): a ring; each step sends this rank's K and V block to the next
//       cp rank and receives the previous one's while the current block's attention runs (TE:
//       send/recv on the cp stream, overlapped). Forward: the first block, then cp - 1 steps of
//       max(block, exchange); backward: the K and V and the partial dK and dV go around (twice
//       the bytes). What the block cannot hide is exposed; the hidden part slows the block by the
//       contention factor, as TP overlap does.
//   all_gather (Llama 3, Dubey et al. 2024 section 3.3.2: "the all-gather communication latency
//       is exposed in the critical path"): K and V all-gathered over cp before the forward (and
//       again before the backward), dK and dV reduce-scattered after it; all exposed.
//   a2a (Ulysses, Jacobs et al. 2023): all-to-alls of Q, K, V before and of the output after the
//       attention (backward: of dO, then dQ, dK, dV), each rank attending the whole sequence with
//       heads / (tp cp) heads: the same pairs, so the same block time; K and V are replicated up
//       to one head per rank when kv_heads < tp cp. All exposed.
// The exchanges are folded into the attention core op's time (its KV traffic is the op's own):
// the simulator and the closed form read the same op, so they agree by construction.

#include <cstdint>

#include "model/implementation.h"
#include "model/model_spec.h"
#include "planner/cost/collective.h"
#include "planner/cost/layer_ops.h"
#include "planner/cost/placement.h"

namespace parallax::planner {

//! What the exchanges are priced with.
struct CpPricing {
  const CollectiveModel& collectives;
  PlacedGroup cp_group;  //!< the layout's cp group, placed
  CpCommType type = CpCommType::kP2p;  //!< the profile's cp_comm_type
  double contention = 1;     //!< compute slowdown under overlapped communication
  double element_bytes = 2;  //!< of K, V, Q and their gradients
};

//! Turns `layer`'s attention core ops (priced at s / cp tokens) into the cp rank's: cp blocks and
//! the exchanges of `p.type` over `p.cp_group`. `key.seq_len` is the whole sequence. No-op when
//! key.cp == 1. Returns what the exchanges cost.
CpExchange PriceContextParallel(UnitOps& layer, const ModelSpec& m, const UnitKey& key, const CpPricing& p);

//! Seconds of one ring step's send/recv of `bytes` over `cp_group` (the slowest hop: across nodes
//! when the group spans them, each sender with its share of the node's NICs).
double CpRingStepTime(const CollectiveModel& collectives, const PlacedGroup& cp_group, double bytes);

}  // namespace parallax::planner
