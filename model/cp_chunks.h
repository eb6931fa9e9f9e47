#pragma once
// Context parallelism's causal load balance (Megatron-Core, get_batch_on_this_cp_rank): the
// sequence is cut into 2*cp equal chunks and cp rank i holds chunks i and 2*cp-1-i, so every rank
// owns as much of the causal triangle as every other. The one definition of which positions a cp
// rank holds and of which (query chunk, key chunk) pairs attend, for the executor's data split,
// rotary positions and ring attention. A rank's local sequence is its two chunks back to back
// (with cp = 1: chunks 0 and 1, the whole sequence in order).

#include <cstdint>

namespace parallax {

//! Chunks of the sequence under the load balance (seq_len must be divisible by it: ValidateLayout).
inline int64_t CpChunkCount(int64_t cp) { return 2 * cp; }
//! Positions in one chunk.
inline int64_t CpChunkLength(int64_t seq_len, int64_t cp) { return seq_len / CpChunkCount(cp); }
//! The global chunk held as local half `half` (0 or 1) by cp rank `cp_idx`: i, then 2*cp-1-i.
inline int64_t CpChunkOf(int64_t cp, int64_t cp_idx, int64_t half) {
  return half == 0 ? cp_idx : CpChunkCount(cp) - 1 - cp_idx;
}
//! The global sequence position of local position `local` (0 .. seq_len/cp - 1) of cp rank
//! `cp_idx`.
inline int64_t CpGlobalPosition(int64_t seq_len, int64_t cp, int64_t cp_idx, int64_t local) {
  if (cp == 1) return local;
  const int64_t len = CpChunkLength(seq_len, cp);
  return CpChunkOf(cp, cp_idx, local / len) * len + local % len;
}

//! How a query chunk attends to a key chunk under the causal mask.
enum class CpBlockVisibility {
  kFull,      //!< the key chunk lies wholly before the query chunk: no mask
  kDiagonal,  //!< the same chunk: causal within it
  kNone,      //!< the key chunk lies wholly after: no contribution, the block is skipped
};
inline CpBlockVisibility VisibilityOf(int64_t query_chunk, int64_t key_chunk) {
  if (key_chunk < query_chunk) return CpBlockVisibility::kFull;
  return key_chunk == query_chunk ? CpBlockVisibility::kDiagonal : CpBlockVisibility::kNone;
}

//! Ring step `step` (0 .. cp-1): the cp rank whose K/V block rank `cp_idx` holds, K/V moving to the
//! next rank (cp_idx + 1) each step (Megatron-Core's p2p ring).
inline int64_t CpRingSource(int64_t cp, int64_t cp_idx, int64_t step) {
  return (cp_idx - step % cp + cp) % cp;
}

}  // namespace parallax
