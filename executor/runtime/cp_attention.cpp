#include "executor/runtime/cp_attention.h"

#include <array>
#include <limits>
#include <utility>
#include <vector>

#include "model/cp_chunks.h"

namespace parallax::executor {

namespace {

// One attention call of the ring: a local query chunk against one or both chunks of the K/V block
// held (contiguous in the block, so two fully visible chunks are one call).
struct BlockCall {
  int64_t q_half = 0;
  int64_t k_first_half = 0;
  AttentionShape shape;
};

// The calls of ring step `step` on this rank: the visible (query chunk, key chunk) pairs.
std::vector<BlockCall> StepCalls(const RuntimeContext& ctx, const AttentionShape& local,
                                 int64_t step) {
  const int64_t len = CpChunkLength(ctx.seq, ctx.cp);
  const int64_t src = CpRingSource(ctx.cp, ctx.cp_idx, step);
  std::vector<BlockCall> calls;
  for (int64_t qh = 0; qh < 2; ++qh) {
    const int64_t q_chunk = CpChunkOf(ctx.cp, ctx.cp_idx, qh);
    AttentionShape s = local;  // one chunk of queries against one chunk of keys
    s.seq = len;
    s.kv_seq = len;
    s.causal_offset = 0;
    if (local.window > 0) {  // local attention: each pair by its absolute positions, if any row sees a key
      s.query_start = q_chunk * len;
      for (int64_t kh = 0; kh < 2; ++kh) {
        s.causal_offset = s.query_start - CpChunkOf(ctx.cp, src, kh) * len;
        if (s.AnyVisible()) calls.push_back({qh, kh, s});
      }
      continue;
    }
    std::array<CpBlockVisibility, 2> vis{};
    for (int64_t kh = 0; kh < 2; ++kh)
      vis[static_cast<size_t>(kh)] = VisibilityOf(q_chunk, CpChunkOf(ctx.cp, src, kh));
    if (vis[0] == CpBlockVisibility::kFull && vis[1] == CpBlockVisibility::kFull) {
      s.kv_seq = 2 * len;
      s.causal = false;
      calls.push_back({qh, 0, s});
      continue;
    }
    for (int64_t kh = 0; kh < 2; ++kh) {
      if (vis[static_cast<size_t>(kh)] == CpBlockVisibility::kNone) continue;
      s.causal = vis[static_cast<size_t>(kh)] == CpBlockVisibility::kDiagonal;
      calls.push_back({qh, kh, s});
    }
  }
  return calls;
}

// Rows of one chunk of a [local_seq * batch, cols] tensor.
int64_t ChunkElements(const RuntimeContext& ctx, int64_t cols) {
  return CpChunkLength(ctx.seq, ctx.cp) * ctx.batch * cols;
}

// One ring exchange on the cp stream after the compute so far: `send` to the next cp rank,
// `recv` (may be null) from the previous one, recorded as one cp_sendrecv op.
Status RingExchange(RuntimeContext& ctx, int64_t layer, DevPtr send, DevPtr recv, int64_t count,
                    int tag) {
  Communicator& cp = *ctx.groups->cp;
  const int next = static_cast<int>((ctx.cp_idx + 1) % ctx.cp),
            prev = static_cast<int>((ctx.cp_idx + ctx.cp - 1) % ctx.cp);
  PX_TRY(ctx.AfterCompute(StreamKind::kCpComm));
  Stream& s = ctx.backend->stream(StreamKind::kCpComm);
  auto scope = ctx.rec->Op(OpKind::kCpSendRecv, layer, -1, count * SizeOf(send.dtype),
                           static_cast<int32_t>(ctx.cp));
  cp.GroupStart();
  Status st = cp.Send(send, count, next, tag, s);
  if (st && recv) st = cp.Recv(recv, count, prev, tag, s);
  Status end = cp.GroupEnd();
  PX_TRY(st);
  return end;
}

// The buffer of a double-buffered pair that ring step `step` holds.
size_t Slot(int64_t step) { return static_cast<size_t>(step % 2); }

constexpr int kKvTag = 0;
constexpr int kGradTag = 1;

}  // namespace

Status CpAttentionForward(RuntimeContext& ctx, int64_t layer, const CpAttentionArgs& a) {
  Backend& be = *ctx.backend;
  const AttentionShape& sh = a.shape;
  const int64_t kv = sh.kv_elements(), q_chunk = ChunkElements(ctx, sh.heads * sh.head_dim);
  const int64_t lse_chunk = ChunkElements(ctx, sh.heads),
                k_chunk = ChunkElements(ctx, sh.kv_heads * sh.head_dim);
  std::array<Tensor, 2> blocks;
  for (Tensor& b : blocks) {
    PX_ASSIGN(b, ctx.Act(2 * kv));  // [k | v]
  }
  PX_ASSIGN(Tensor part, ctx.Act(q_chunk));
  PX_ASSIGN(Tensor part_lse, ctx.F32(lse_chunk, MemoryKind::kWorkspace));
  PX_ASSIGN(Tensor acc, ctx.F32(sh.q_elements(), MemoryKind::kWorkspace));  // the merged out in fp32
  be.Copy({.dst = blocks[0].ptr(), .src = a.k, .n = kv});
  be.Copy({.dst = blocks[0].at(kv), .src = a.v, .n = kv});
  be.Fill(a.lse, sh.stats_floats(), -std::numeric_limits<float>::infinity());
  for (int64_t step = 0; step < ctx.cp; ++step) {
    const Tensor& held = blocks[Slot(step)];
    PX_TRY(ctx.ComputeAfter(StreamKind::kCpComm));  // the block received in the step before
    if (step + 1 < ctx.cp)
      PX_TRY(RingExchange(ctx, layer, held.ptr(), blocks[Slot(step + 1)].ptr(), 2 * kv, kKvTag));
    auto s = ctx.rec->Op(OpKind::kAttnCore, layer);
    for (const BlockCall& c : StepCalls(ctx, sh, step)) {
      const DevPtr k = held.at(c.k_first_half * k_chunk);
      be.AttentionForward({.shape = c.shape,
                           .q = a.q + c.q_half * q_chunk,
                           .k = k,
                           .v = k + kv,
                           .out = part.ptr(),
                           .lse = part_lse.ptr()});
      be.AttentionMerge({.out = acc.at(c.q_half * q_chunk),
                         .lse = a.lse + c.q_half * lse_chunk,
                         .block_out = part.ptr(),
                         .block_lse = part_lse.ptr(),
                         .rows = c.shape.seq * sh.batch,
                         .heads = sh.heads,
                         .head_dim = sh.head_dim});
    }
    if (step + 1 == ctx.cp) be.Copy({.dst = a.out, .src = acc.ptr(), .n = sh.q_elements()});
  }
  return {};
}

Status CpAttentionBackward(RuntimeContext& ctx, int64_t layer, const CpAttentionArgs& a) {
  Backend& be = *ctx.backend;
  const AttentionShape& sh = a.shape;
  const int64_t kv = sh.kv_elements(), q_chunk = ChunkElements(ctx, sh.heads * sh.head_dim);
  const int64_t lse_chunk = ChunkElements(ctx, sh.heads),
                k_chunk = ChunkElements(ctx, sh.kv_heads * sh.head_dim);
  // [k | v] of the block held, and its running [dk | dv] in fp32 (summed over up to cp ranks).
  std::array<Tensor, 2> blocks, grads;
  for (Tensor& b : blocks) {
    PX_ASSIGN(b, ctx.Act(2 * kv));
  }
  for (Tensor& g : grads) {
    PX_ASSIGN(g, ctx.F32(2 * kv, MemoryKind::kWorkspace));
  }
  PX_ASSIGN(Tensor part, ctx.F32(2 * kv, MemoryKind::kWorkspace));
  PX_ASSIGN(Tensor dq, ctx.F32(sh.q_elements(), MemoryKind::kWorkspace));  // fp32 sum over the steps
  PX_ASSIGN(Tensor dq_part, ctx.Act(q_chunk));
  PX_ASSIGN(Tensor dkv_part, ctx.Act(4 * k_chunk));  // at most two chunks of dk and of dv
  be.Copy({.dst = blocks[0].ptr(), .src = a.k, .n = kv});
  be.Copy({.dst = blocks[0].at(kv), .src = a.v, .n = kv});
  for (int64_t step = 0; step < ctx.cp; ++step) {
    const Tensor& held = blocks[Slot(step)];
    PX_TRY(ctx.ComputeAfter(StreamKind::kCpComm));  // the block and its running gradient
    if (step + 1 < ctx.cp)
      PX_TRY(RingExchange(ctx, layer, held.ptr(), blocks[Slot(step + 1)].ptr(), 2 * kv, kKvTag));
    {
      auto s = ctx.rec->Op(OpKind::kAttnCore, layer);
      be.Fill(part.ptr(), 2 * kv, 0.0f);
      for (const BlockCall& c : StepCalls(ctx, sh, step)) {
        const DevPtr k = held.at(c.k_first_half * k_chunk);
        const int64_t kn = c.shape.kv_elements();
        be.AttentionBackward({.shape = c.shape,
                              .q = a.q + c.q_half * q_chunk,
                              .k = k,
                              .v = k + kv,
                              .out = a.out + c.q_half * q_chunk,
                              .lse = a.lse + c.q_half * lse_chunk,
                              .dout = a.dout + c.q_half * q_chunk,
                              .dq = dq_part.ptr(),
                              .dk = dkv_part.ptr(),
                              .dv = dkv_part.at(kn)});
        be.Axpy({.y = dq.at(c.q_half * q_chunk), .x = dq_part.ptr(), .n = q_chunk});
        be.Axpy({.y = part.at(c.k_first_half * k_chunk), .x = dkv_part.ptr(), .n = kn});
        be.Axpy({.y = part.at(kv + c.k_first_half * k_chunk), .x = dkv_part.at(kn), .n = kn});
      }
      // The block's gradient so far (from the ranks it visited before) plus this rank's part.
      if (step > 0) be.Axpy({.y = part.ptr(), .x = grads[Slot(step)].ptr(), .n = 2 * kv});
    }
    PX_TRY(RingExchange(ctx, layer, part.ptr(), grads[Slot(step + 1)].ptr(), 2 * kv, kGradTag));
    std::swap(part, grads[Slot(step)]);
  }
  // After cp hops every block's gradient is back with its owner.
  PX_TRY(ctx.ComputeAfter(StreamKind::kCpComm));
  auto s = ctx.rec->Op(OpKind::kAttnCore, layer);
  be.Copy({.dst = a.dq, .src = dq.ptr(), .n = sh.q_elements()});
  be.Copy({.dst = a.dk, .src = grads[Slot(ctx.cp)].ptr(), .n = kv});
  be.Copy({.dst = a.dv, .src = grads[Slot(ctx.cp)].at(kv), .n = kv});
  return {};
}

void RotaryOnChunks(RuntimeContext& ctx, DevPtr x, int64_t heads, int64_t head_dim, bool inverse) {
  Backend& be = *ctx.backend;
  if (ctx.cp == 1) {
    be.Rotary({.x = x,
               .seq = ctx.seq,
               .batch = ctx.batch,
               .heads = heads,
               .head_dim = head_dim,
               .inverse = inverse});
    return;
  }
  const int64_t len = CpChunkLength(ctx.seq, ctx.cp);
  for (int64_t half = 0; half < 2; ++half) {
    be.Rotary({.x = x + half * len * ctx.batch * heads * head_dim,
               .seq = len,
               .batch = ctx.batch,
               .heads = heads,
               .head_dim = head_dim,
               .first_position = CpChunkOf(ctx.cp, ctx.cp_idx, half) * len,
               .inverse = inverse});
  }
}

}  // namespace parallax::executor
