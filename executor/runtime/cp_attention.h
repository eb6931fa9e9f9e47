#pragma once
// Context parallelism in the layer (Megatron-Core's p2p ring with causal load balance): each cp
// rank holds sequence chunks i and 2*cp-1-i (model/cp_chunks.h), back to back as its local
// sequence; rotary positions follow the chunks, and attention runs as a ring over the cp group.

#include <cstdint>

#include "executor/backend.h"
#include "executor/runtime/context.h"

namespace parallax::executor {

//! Rotary embedding in place on x [local_seq * batch, heads * head_dim] at the global positions of
//! this rank's chunks (one call over the whole sequence when cp = 1).
void RotaryOnChunks(RuntimeContext& ctx, DevPtr x, int64_t heads, int64_t head_dim, bool inverse);

//! Ring attention over the cp group (Megatron-Core's p2p context parallelism; Liu et al. 2023):
//! `shape` is the local one (seq = local_seq, this rank's two chunks). Forward: cp steps, each
//! attending the local query chunks to the K/V block held (its two chunks: fully visible, diagonal
//! or skipped, model/cp_chunks.h) and merging the partial (out, lse) by the log-sum-exp rule, while
//! the next block travels on the cp stream. Writes out and lse (fp32, shape.stats_floats()).
struct CpAttentionArgs {
  [[no_unique_address]] ByName by_name{};
  AttentionShape shape;
  DevPtr q{}, k{}, v{};
  DevPtr out{}, lse{};
  DevPtr dout{};            //!< backward only
  DevPtr dq{}, dk{}, dv{};  //!< backward only, overwritten
};
Status CpAttentionForward(RuntimeContext& ctx, int64_t layer, const CpAttentionArgs& a);
//! Backward from the merged out and lse: K/V circulate again, each block's dK/dV travel with it
//! (fp32) and are summed on the way back to their owner; dQ is summed locally (fp32).
Status CpAttentionBackward(RuntimeContext& ctx, int64_t layer, const CpAttentionArgs& a);

}  // namespace parallax::executor
