// Multi-head latent attention (DeepSeek-V2, section 2.1.2; DeepSeek-V3's modeling code), the
// projections around the attention core. Queries come from a low-rank latent (q_lora_rank; or the
// input directly), each head's query split into a no-position part (qk_nope_head_dim) and a rotary
// part (qk_rope_head_dim); keys and values come from one shared KV latent (kv_lora_rank), each head's
// key a no-position part from the latent plus one rotary key per token that every head shares. Both
// latents pass an RMSNorm. The core then runs as ordinary attention with one key per head at width
// nope + rope, the values zero-padded to that width (the output projection reads the value width
// only), so both backends' attention kernels serve it unchanged.
//
// Tensor parallelism as Megatron-Core splits it (and model/param_groups.cpp counts it): the
// up-projections by heads, the down-projections and the latent norms whole on every TP rank, whose
// gradients are partial (each rank back-propagates its own heads) and summed over TP with the other
// tp_partial parameters (executor/runtime/grad_sync.cpp).
#include <algorithm>
#include <tuple>

#include "executor/runtime/cp_attention.h"
#include "executor/runtime/transformer_layer.h"

namespace parallax::executor {

namespace {

struct MlaDims {
  int64_t H, T, nq, nope, rope, D, V, ql, kl;
  int64_t Widest() const { return nq * std::max({nope, rope, V}); }
};

MlaDims DimsOf(const RuntimeContext& ctx) {
  const ModelSpec& m = ctx.model;
  return {.H = m.hidden,
          .T = ctx.tokens,
          .nq = m.heads / ctx.tp,
          .nope = m.qk_nope_head_dim,
          .rope = m.qk_rope_head_dim,
          .D = m.qk_nope_head_dim + m.qk_rope_head_dim,
          .V = m.v_head_dim,
          .ql = m.q_lora_rank,
          .kl = m.kv_lora_rank};
}

//! [T, heads, V] into [T, heads, D], zero beyond V: the values (or the attention output) at the
//! query width the attention kernels take.
void Widen(Backend& be, DevPtr narrow, DevPtr wide, const MlaDims& d) {
  be.Fill(wide, d.T * d.nq * d.D, 0.0f);
  be.Copy2D({.dst = wide, .src = narrow, .rows = d.T * d.nq, .cols = d.V, .dst_ld = d.D, .src_ld = d.V});
}

//! A latent's RMSNorm (tokens rows of `cols`): its statistics into `rstd` and the normed latent into
//! `y`; in forward, and again in backward from the kept latent `x`.
Status NormLatent(RuntimeContext& ctx, const Tensor& x, DevPtr gamma, int64_t cols, Tensor& rstd, Tensor& y) {
  PX_ASSIGN(rstd, ctx.F32(ctx.tokens));
  PX_ASSIGN(y, ctx.Act(ctx.tokens * cols));
  ctx.backend->RmsNormForward({.x = x.ptr(), .gamma = gamma, .y = y.ptr(), .rstd = rstd.ptr(), .rows = ctx.tokens,
                               .cols = cols, .eps = kNormEps});
  return {};
}

}  // namespace

Status TransformerLayer::MlaNarrow(RuntimeContext& ctx, LayerCache& c) {
  const MlaDims d = DimsOf(ctx);
  PX_ASSIGN(c.ctx_v, ctx.Act(d.T * d.nq * d.V));
  ctx.backend->Copy2D(
      {.dst = c.ctx_v.ptr(), .src = c.ctx.ptr(), .rows = d.T * d.nq, .cols = d.V, .dst_ld = d.V, .src_ld = d.D});
  c.ctx.Reset();
  c.v.Reset();
  return {};
}

Status TransformerLayer::MlaWiden(RuntimeContext& ctx, LayerCache& c) {
  const MlaDims d = DimsOf(ctx);
  PX_ASSIGN(c.ctx, ctx.Act(d.T * d.nq * d.D));
  Widen(*ctx.backend, c.ctx_v.ptr(), c.ctx.ptr(), d);
  PX_ASSIGN(c.v, ctx.Act(d.T * d.nq * d.D));
  Widen(*ctx.backend, c.mla_v.ptr(), c.v.ptr(), d);
  c.ctx_v.Reset();
  c.mla_v.Reset();
  return {};
}

Status TransformerLayer::MlaProject(RuntimeContext& ctx, LayerCache& c) {
  Backend& be = *ctx.backend;
  const MlaDims d = DimsOf(ctx);
  const bool rotary = ctx.model.position == PositionKind::kRotary;
  auto s = ctx.rec->Op(OpKind::kQkv, layer_);
  const DevPtr in = c.ag.ptr();
  // The query latent and its norm, when the model compresses queries.
  DevPtr q_in = in;
  int64_t q_width = d.H;
  if (d.ql > 0) {
    PX_ASSIGN(c.cq, ctx.Act(d.T * d.ql));
    LinearForward(be, {.x = in, .w = P(ix_.q_down), .y = c.cq.ptr(), .rows = d.T, .n = d.ql, .k = d.H,
                       .fp8 = F8(ix_.q_down)});
    PX_TRY(NormLatent(ctx, c.cq, P(ix_.q_norm), d.ql, c.cq_rstd, c.cqn));
    q_in = c.cqn.ptr();
    q_width = d.ql;
  }
  PX_ASSIGN(Tensor part, ctx.Act(d.T * d.Widest()));  // one head-major part at a time
  const auto into_heads = [&](DevPtr dst, int64_t offset, int64_t cols) {
    be.Copy2D({.dst = dst + offset, .src = part.ptr(), .rows = d.T * d.nq, .cols = cols, .dst_ld = d.D, .src_ld = cols});
  };
  LinearForward(be, {.x = q_in, .w = P(ix_.q_nope), .y = part.ptr(), .rows = d.T, .n = d.nq * d.nope, .k = q_width,
                     .fp8 = F8(ix_.q_nope)});
  into_heads(c.q.ptr(), 0, d.nope);
  LinearForward(be, {.x = q_in, .w = P(ix_.q_rope), .y = part.ptr(), .rows = d.T, .n = d.nq * d.rope, .k = q_width,
                     .fp8 = F8(ix_.q_rope)});
  if (rotary) RotaryOnChunks(ctx, part.ptr(), d.nq, d.rope, false);
  into_heads(c.q.ptr(), d.nope, d.rope);

  // The KV latent and its norm; the keys' no-position parts and the values from it.
  PX_ASSIGN(c.ckv, ctx.Act(d.T * d.kl));
  LinearForward(be, {.x = in, .w = P(ix_.kv_down), .y = c.ckv.ptr(), .rows = d.T, .n = d.kl, .k = d.H,
                     .fp8 = F8(ix_.kv_down)});
  PX_TRY(NormLatent(ctx, c.ckv, P(ix_.kv_norm), d.kl, c.ckv_rstd, c.ckvn));
  LinearForward(be, {.x = c.ckvn.ptr(), .w = P(ix_.k_up), .y = part.ptr(), .rows = d.T, .n = d.nq * d.nope,
                     .k = d.kl, .fp8 = F8(ix_.k_up)});
  into_heads(c.k.ptr(), 0, d.nope);
  PX_ASSIGN(c.mla_v, ctx.Act(d.T * d.nq * d.V));
  LinearForward(be, {.x = c.ckvn.ptr(), .w = P(ix_.v_up), .y = c.mla_v.ptr(), .rows = d.T, .n = d.nq * d.V,
                     .k = d.kl, .fp8 = F8(ix_.v_up)});
  Widen(be, c.mla_v.ptr(), c.v.ptr(), d);
  // Kept for backward: the latents before their norms (the normed ones are rebuilt from them).
  for (Tensor* t : {&c.cq_rstd, &c.cqn, &c.ckv_rstd, &c.ckvn}) t->Reset();

  // The rotary key: one per token, the same in every head.
  PX_ASSIGN(Tensor kr, ctx.Act(d.T * d.rope));
  LinearForward(be, {.x = in, .w = P(ix_.k_rope), .y = kr.ptr(), .rows = d.T, .n = d.rope, .k = d.H,
                     .fp8 = F8(ix_.k_rope)});
  if (rotary) RotaryOnChunks(ctx, kr.ptr(), 1, d.rope, false);
  for (int64_t h = 0; h < d.nq; ++h) {
    be.Copy2D({.dst = c.k.ptr() + (h * d.D + d.nope), .src = kr.ptr(), .rows = d.T, .cols = d.rope,
               .dst_ld = d.nq * d.D, .src_ld = d.rope});
  }
  return {};
}

Status TransformerLayer::MlaProjectGrad(RuntimeContext& ctx, LayerCache& c, Tensor& dq, Tensor& dk, Tensor& dv,
                                        DevPtr dag) {
  Backend& be = *ctx.backend;
  const MlaDims d = DimsOf(ctx);
  const bool rotary = ctx.model.position == PositionKind::kRotary;
  auto s = ctx.rec->Op(OpKind::kQkv, layer_);
  const DevPtr in = c.ag.ptr();
  // The normed latents again from the kept ones (two memory-bound passes, not two tensors kept).
  for (auto [x, rstd, y, gamma, cols] : {std::tuple{&c.cq, &c.cq_rstd, &c.cqn, ix_.q_norm, d.ql},
                                         std::tuple{&c.ckv, &c.ckv_rstd, &c.ckvn, ix_.kv_norm, d.kl}}) {
    if (cols > 0) PX_TRY(NormLatent(ctx, *x, P(gamma), cols, *rstd, *y));
  }
  PX_ASSIGN(Tensor part, ctx.Act(d.T * d.Widest()));
  const auto from_heads = [&](const Tensor& src, int64_t offset, int64_t cols) {
    be.Copy2D({.dst = part.ptr(), .src = src.ptr() + offset, .rows = d.T * d.nq, .cols = cols, .dst_ld = cols,
               .src_ld = d.D});
  };

  // Values and the keys' no-position parts back to the normed KV latent, then through its norm and
  // down-projection into d(input).
  PX_ASSIGN(Tensor dckvn, ctx.Act(d.T * d.kl));
  from_heads(dv, 0, d.V);
  LinearBackward(be, {.dy = part.ptr(), .x = c.ckvn.ptr(), .w = P(ix_.v_up), .dw = G(ix_.v_up), .dx = dckvn.ptr(),
                      .rows = d.T, .n = d.nq * d.V, .k = d.kl, .fp8 = F8(ix_.v_up)});
  dv.Reset();
  from_heads(dk, 0, d.nope);
  LinearBackward(be, {.dy = part.ptr(), .x = c.ckvn.ptr(), .w = P(ix_.k_up), .dw = G(ix_.k_up), .dx = dckvn.ptr(),
                      .rows = d.T, .n = d.nq * d.nope, .k = d.kl, .accumulate_dx = true, .fp8 = F8(ix_.k_up)});
  PX_ASSIGN(Tensor dckv, ctx.Act(d.T * d.kl));
  be.RmsNormBackward({.dy = dckvn.ptr(), .x = c.ckv.ptr(), .gamma = P(ix_.kv_norm), .rstd = c.ckv_rstd.ptr(),
                      .dx = dckv.ptr(), .dgamma = G(ix_.kv_norm), .rows = d.T, .cols = d.kl});
  dckvn.Reset();
  LinearBackward(be, {.dy = dckv.ptr(), .x = in, .w = P(ix_.kv_down), .dw = G(ix_.kv_down), .dx = dag, .rows = d.T,
                      .n = d.kl, .k = d.H, .fp8 = F8(ix_.kv_down)});
  dckv.Reset();

  // The shared rotary key: the sum over the heads of their rotary parts' gradients.
  PX_ASSIGN(Tensor dkr, ctx.Act(d.T * d.rope));
  for (int64_t h = 0; h < d.nq; ++h) {
    be.Copy2D({.dst = dkr.ptr(), .src = dk.ptr() + (h * d.D + d.nope), .rows = d.T, .cols = d.rope,
               .dst_ld = d.rope, .src_ld = d.nq * d.D, .accumulate = h > 0});
  }
  dk.Reset();
  if (rotary) RotaryOnChunks(ctx, dkr.ptr(), 1, d.rope, true);
  LinearBackward(be, {.dy = dkr.ptr(), .x = in, .w = P(ix_.k_rope), .dw = G(ix_.k_rope), .dx = dag, .rows = d.T,
                      .n = d.rope, .k = d.H, .accumulate_dx = true, .fp8 = F8(ix_.k_rope)});
  dkr.Reset();

  // Queries: both parts back to their input (the normed query latent, or the layer input).
  const bool latent = d.ql > 0;
  const DevPtr q_in = latent ? c.cqn.ptr() : in;
  const int64_t q_width = latent ? d.ql : d.H;
  Tensor dcqn;
  if (latent) {
    PX_ASSIGN(dcqn, ctx.Act(d.T * d.ql));
  }
  const DevPtr dq_in = latent ? dcqn.ptr() : dag;
  from_heads(dq, 0, d.nope);
  LinearBackward(be, {.dy = part.ptr(), .x = q_in, .w = P(ix_.q_nope), .dw = G(ix_.q_nope), .dx = dq_in, .rows = d.T,
                      .n = d.nq * d.nope, .k = q_width, .accumulate_dx = !latent, .fp8 = F8(ix_.q_nope)});
  from_heads(dq, d.nope, d.rope);
  dq.Reset();
  if (rotary) RotaryOnChunks(ctx, part.ptr(), d.nq, d.rope, true);
  LinearBackward(be, {.dy = part.ptr(), .x = q_in, .w = P(ix_.q_rope), .dw = G(ix_.q_rope), .dx = dq_in, .rows = d.T,
                      .n = d.nq * d.rope, .k = q_width, .accumulate_dx = true, .fp8 = F8(ix_.q_rope)});
  if (latent) {
    PX_ASSIGN(Tensor dcq, ctx.Act(d.T * d.ql));
    be.RmsNormBackward({.dy = dcqn.ptr(), .x = c.cq.ptr(), .gamma = P(ix_.q_norm), .rstd = c.cq_rstd.ptr(),
                        .dx = dcq.ptr(), .dgamma = G(ix_.q_norm), .rows = d.T, .cols = d.ql});
    LinearBackward(be, {.dy = dcq.ptr(), .x = in, .w = P(ix_.q_down), .dw = G(ix_.q_down), .dx = dag, .rows = d.T,
                        .n = d.ql, .k = d.H, .accumulate_dx = true, .fp8 = F8(ix_.q_down)});
  }
  for (Tensor* t : {&c.cq, &c.cq_rstd, &c.cqn, &c.ckv, &c.ckv_rstd, &c.ckvn}) t->Reset();
  return {};
}

}  // namespace parallax::executor
