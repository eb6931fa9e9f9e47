#include "executor/runtime/transformer_layer.h"

#include <cmath>
#include <string>

#include "executor/runtime/tp_ops.h"

namespace parallax::executor {

namespace {

// Sequence parallel keeps a column-parallel GEMM's input sharded over the sequence and gathers it
// again for the weight gradient in backward (Korthikanti et al. 2022, section 4.2.2).
Result<Tensor> KeepLocalCopy(RuntimeContext& ctx, const Tensor& local, int64_t cols) {
  if (!ctx.sp) return Tensor();
  PX_ASSIGN(Tensor copy, ctx.Act(ctx.local_tokens * cols));
  ctx.backend->Copy(copy.ptr(), local.ptr(), ctx.local_tokens * cols);
  return copy;
}

Result<Tensor> Regather(RuntimeContext& ctx, const Tensor& local, int64_t cols, int64_t layer) {
  PX_ASSIGN(Tensor copy, KeepLocalCopy(ctx, local, cols));
  return EnterRegion(ctx, std::move(copy), cols, layer);
}

constexpr float kNormEps = 1e-5f;

// The residual join in front of a pre-norm: h = branch + stream (+ bias), written to `h` by the
// fused residual + norm kernel.
struct ResidualJoin {
  DevPtr branch, stream, bias;
  DevPtr h;
};

// A sub-block's pre-norm and its entry into the TP region: `mean`/`rstd` kept for backward, the
// normalised input kept local (sequence parallel) and gathered (or passed on) into `region`. With
// `join`, the norm's input is the residual sum, formed in the same kernel (fused residual + norm);
// its time is the norm op's.
Status NormIntoRegion(RuntimeContext& ctx, OpKind op, int64_t layer, DevPtr x, DevPtr gamma, DevPtr beta,
                      Tensor& mean, Tensor& rstd, Tensor& local, Tensor& region, const ResidualJoin* join = nullptr) {
  const int64_t H = ctx.model.hidden, Tl = ctx.local_tokens;
  PX_ASSIGN(Tensor y, ctx.Act(Tl * H));
  PX_ASSIGN(mean, ctx.F32(Tl));
  PX_ASSIGN(rstd, ctx.F32(Tl));
  {
    auto s = ctx.rec->Op(op, layer);
    if (join) {
      ResidualNormForward(ctx, join->branch, join->stream, join->bias, join->h, gamma, beta, y.ptr(), mean.ptr(),
                          rstd.ptr(), Tl);
    } else {
      NormForward(ctx, x, gamma, beta, y.ptr(), mean.ptr(), rstd.ptr(), Tl);
    }
  }
  PX_ASSIGN(local, KeepLocalCopy(ctx, y, H));
  PX_ASSIGN(region, EnterRegion(ctx, std::move(y), H, layer));
  return {};
}
}

void NormForward(RuntimeContext& ctx, DevPtr x, DevPtr gamma, DevPtr beta, DevPtr y, DevPtr mean, DevPtr rstd,
                 int64_t rows) {
  const int64_t h = ctx.model.hidden;
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->LayerNormForward(x, gamma, beta, y, mean, rstd, rows, h, kNormEps);
  } else {
    ctx.backend->RmsNormForward(x, gamma, y, rstd, rows, h, kNormEps);
  }
}

void ResidualNormForward(RuntimeContext& ctx, DevPtr branch, DevPtr stream, DevPtr bias, DevPtr h, DevPtr gamma,
                         DevPtr beta, DevPtr y, DevPtr mean, DevPtr rstd, int64_t rows) {
  const int64_t hd = ctx.model.hidden;
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->ResidualLayerNormForward(branch, stream, bias, h, gamma, beta, y, mean, rstd, rows, hd, kNormEps);
  } else {
    ctx.backend->ResidualRmsNormForward(branch, stream, bias, h, gamma, y, rstd, rows, hd, kNormEps);
  }
}

Status NormBackwardAdd(RuntimeContext& ctx, DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd,
                       DevPtr dresidual, DevPtr dgamma, DevPtr dbeta, int64_t rows) {
  const int64_t h = ctx.model.hidden;
  if (ctx.model.norm == NormKind::kLayerNorm) {
    return ctx.backend->LayerNormBackwardAdd(dy, x, gamma, mean, rstd, dresidual, dgamma, dbeta, rows, h);
  }
  return ctx.backend->RmsNormBackwardAdd(dy, x, gamma, rstd, dresidual, dgamma, rows, h);
}

void NormBackward(RuntimeContext& ctx, DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd, DevPtr dx,
                  DevPtr dgamma, DevPtr dbeta, int64_t rows) {
  const int64_t h = ctx.model.hidden;
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->LayerNormBackward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, h);
  } else {
    ctx.backend->RmsNormBackward(dy, x, gamma, rstd, dx, dgamma, rows, h);
  }
}

void LinearForward(Backend& be, DevPtr x, DevPtr w, DevPtr bias, DevPtr y, int64_t rows, int64_t n, int64_t k) {
  GemmArgs g;
  g.ta = Trans::kNo;
  g.tb = Trans::kYes;
  g.m = rows;
  g.n = n;
  g.k = k;
  g.a = x;
  g.lda = k;
  g.b = w;
  g.ldb = k;
  g.c = y;
  g.ldc = n;
  be.Gemm(g);
  if (bias) be.AddBias(y, bias, rows, n);
}

void LinearBackward(Backend& be, DevPtr dy, DevPtr x, DevPtr w, DevPtr dw, DevPtr dbias, DevPtr dx, int64_t rows,
                    int64_t n, int64_t k, bool accumulate_dx) {
  GemmArgs wg;  // dW (fp32) += dy^T x
  wg.ta = Trans::kYes;
  wg.m = n;
  wg.n = k;
  wg.k = rows;
  wg.beta = 1.0f;
  wg.a = dy;
  wg.lda = n;
  wg.b = x;
  wg.ldb = k;
  wg.c = dw;
  wg.ldc = k;
  be.Gemm(wg);
  if (dbias) be.BiasBackward(dy, dbias, rows, n);
  if (dx) {
    GemmArgs xg;  // dx = dy W
    xg.m = rows;
    xg.n = k;
    xg.k = n;
    xg.beta = accumulate_dx ? 1.0f : 0.0f;
    xg.a = dy;
    xg.lda = n;
    xg.b = w;
    xg.ldb = k;
    xg.c = dx;
    xg.ldc = k;
    be.Gemm(xg);
  }
}

std::vector<ParamSpec> LayerParamSpecs(const ModelSpec& m, int64_t layer, LayerParamIndex* ix) {
  std::vector<ParamSpec> out;
  const std::string prefix = "layer" + std::to_string(layer) + ".";
  const int64_t h = m.hidden, q = m.heads * m.head_dim(), kv = m.kv_dim(), f = m.ffn_hidden;
  const float std_out = 0.02f / std::sqrt(2.0f * static_cast<float>(m.layers));
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, ShardDim shard, InitKind init, float sd,
                 bool decay, bool sp_partial) {
    ParamSpec p;
    p.name = prefix + name;
    p.rows = rows;
    p.cols = cols;
    p.shard = shard;
    p.init = init;
    p.std = sd;
    p.weight_decay = decay;
    p.sequence_parallel_partial = sp_partial;
    out.push_back(p);
    return static_cast<int>(out.size() - 1);
  };
  const bool ln = m.norm == NormKind::kLayerNorm;
  ix->ln1_w = add("ln1_w", 1, h, ShardDim::kNone, InitKind::kOnes, 0, false, true);
  if (ln && m.bias) ix->ln1_b = add("ln1_b", 1, h, ShardDim::kNone, InitKind::kZeros, 0, false, true);
  ix->wq = add("wq", q, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
  if (m.bias) ix->bq = add("bq", 1, q, ShardDim::kCols, InitKind::kZeros, 0, false, false);
  ix->wk = add("wk", kv, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
  if (m.bias) ix->bk = add("bk", 1, kv, ShardDim::kCols, InitKind::kZeros, 0, false, false);
  ix->wv = add("wv", kv, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
  if (m.bias) ix->bv = add("bv", 1, kv, ShardDim::kCols, InitKind::kZeros, 0, false, false);
  ix->wo = add("wo", h, q, ShardDim::kCols, InitKind::kNormal, std_out, true, false);
  if (m.bias) ix->bo = add("bo", 1, h, ShardDim::kNone, InitKind::kZeros, 0, false, true);
  ix->ln2_w = add("ln2_w", 1, h, ShardDim::kNone, InitKind::kOnes, 0, false, true);
  if (ln && m.bias) ix->ln2_b = add("ln2_b", 1, h, ShardDim::kNone, InitKind::kZeros, 0, false, true);
  if (m.mlp == MlpKind::kSwiglu) {
    ix->fc1 = add("fc1_gate", f, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->b1 = add("b1_gate", 1, f, ShardDim::kCols, InitKind::kZeros, 0, false, false);
    ix->up = add("fc1_up", f, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->bup = add("b1_up", 1, f, ShardDim::kCols, InitKind::kZeros, 0, false, false);
  } else {
    ix->fc1 = add("fc1", f, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->b1 = add("b1", 1, f, ShardDim::kCols, InitKind::kZeros, 0, false, false);
  }
  ix->fc2 = add("fc2", h, f, ShardDim::kCols, InitKind::kNormal, std_out, true, false);
  if (m.bias) ix->b2 = add("b2", 1, h, ShardDim::kNone, InitKind::kZeros, 0, false, true);
  return out;
}

Result<Tensor> TransformerLayer::Forward(RuntimeContext& ctx, Tensor x, LayerCache& cache) {
  const Recompute mode = ctx.layout.recompute;
  auto out = Run(ctx, std::move(x), cache, mode == Recompute::kNone);
  if (out && mode == Recompute::kFull) {
    Tensor keep = std::move(cache.x);
    cache = LayerCache{};
    cache.x = std::move(keep);
    cache.dropped = true;
  }
  return out;
}

Result<Tensor> TransformerLayer::Run(RuntimeContext& ctx, Tensor x, LayerCache& c, bool keep_probs) {
  Backend& be = *ctx.backend;
  OpRecorder& rec = *ctx.rec;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens, Tl = ctx.local_tokens, D = m.head_dim();
  const int64_t nq = m.heads / ctx.tp, nkv = m.kv_heads / ctx.tp, Q = nq * D, K = nkv * D;
  const int64_t F = m.ffn_hidden / ctx.tp;
  c.x = std::move(x);

  if (Status st = NormIntoRegion(ctx, OpKind::kAttnNorm, layer_, c.x.ptr(), P(ix_.ln1_w), P(ix_.ln1_b), c.n1_mean,
                                 c.n1_rstd, c.ag_local, c.ag);
      !st) {
    return st.error();
  }

  PX_ASSIGN(c.q, ctx.Act(T * Q));
  PX_ASSIGN(c.k, ctx.Act(T * K));
  PX_ASSIGN(c.v, ctx.Act(T * K));
  {
    auto s = rec.Op(OpKind::kQkv, layer_);
    LinearForward(be, c.ag.ptr(), P(ix_.wq), P(ix_.bq), c.q.ptr(), T, Q, H);
    LinearForward(be, c.ag.ptr(), P(ix_.wk), P(ix_.bk), c.k.ptr(), T, K, H);
    LinearForward(be, c.ag.ptr(), P(ix_.wv), P(ix_.bv), c.v.ptr(), T, K, H);
    if (m.position == PositionKind::kRotary) {
      be.Rotary(c.q.ptr(), ctx.seq, ctx.batch, nq, D, false);
      be.Rotary(c.k.ptr(), ctx.seq, ctx.batch, nkv, D, false);
    }
  }
  if (ctx.sp) c.ag.Reset();
  const AttentionShape shape{ctx.batch, ctx.seq, nq, nkv, D};
  PX_ASSIGN(c.ctx, ctx.Act(T * Q));
  if (keep_probs) {
    PX_ASSIGN(c.probs, ctx.Act(shape.probs_floats()));  // AttentionForward writes every row in full
  }
  {
    auto s = rec.Op(OpKind::kAttnCore, layer_);
    be.AttentionForward(shape, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.ctx.ptr(), keep_probs ? c.probs.ptr() : DevPtr{});
  }
  PX_ASSIGN(Tensor o, ctx.Act(T * H));
  {
    auto s = rec.Op(OpKind::kAttnOut, layer_);
    LinearForward(be, c.ctx.ptr(), P(ix_.wo), DevPtr{}, o.ptr(), T, H, Q);
  }
  auto o2 = LeaveRegion(ctx, std::move(o), H, layer_);
  if (!o2) return o2.error();
  PX_ASSIGN(c.h, ctx.Act(Tl * H));
  // h = x + attention output + bo, fused into the MLP norm.
  const ResidualJoin join{o2->ptr(), c.x.ptr(), P(ix_.bo), c.h.ptr()};
  if (Status st = NormIntoRegion(ctx, OpKind::kMlpNorm, layer_, c.h.ptr(), P(ix_.ln2_w), P(ix_.ln2_b), c.n2_mean,
                                 c.n2_rstd, c.mg_local, c.mg, &join);
      !st) {
    return st.error();
  }
  o2->Reset();
  const bool swiglu = m.mlp == MlpKind::kSwiglu;
  PX_ASSIGN(c.f1, ctx.Act(T * F));
  if (swiglu) {
    PX_ASSIGN(c.up, ctx.Act(T * F));
  }
  {
    auto s = rec.Op(OpKind::kFc1, layer_);
    // GELU: fc1's bias is added by the fused bias + GELU kernel (the act op).
    LinearForward(be, c.mg.ptr(), P(ix_.fc1), swiglu ? P(ix_.b1) : DevPtr{}, c.f1.ptr(), T, F, H);
    if (swiglu) LinearForward(be, c.mg.ptr(), P(ix_.up), P(ix_.bup), c.up.ptr(), T, F, H);
  }
  if (ctx.sp) c.mg.Reset();
  PX_ASSIGN(c.act, ctx.Act(T * F));
  {
    auto s = rec.Op(OpKind::kAct, layer_);
    if (swiglu) {
      be.SwigluForward(c.f1.ptr(), c.up.ptr(), c.act.ptr(), T * F);
    } else {
      be.BiasGeluForward(c.f1.ptr(), P(ix_.b1), c.act.ptr(), T, F);  // f1 keeps the biased pre-activation
    }
  }
  PX_ASSIGN(Tensor y, ctx.Act(T * H));
  {
    auto s = rec.Op(OpKind::kFc2, layer_);
    LinearForward(be, c.act.ptr(), P(ix_.fc2), DevPtr{}, y.ptr(), T, H, F);
  }
  auto y2 = LeaveRegion(ctx, std::move(y), H, layer_);
  if (!y2) return y2.error();
  PX_ASSIGN(Tensor out, ctx.Act(Tl * H));
  be.ResidualAdd(y2->ptr(), c.h.ptr(), P(ix_.b2), out.ptr(), Tl, H);  // out = h + MLP output + b2, one pass
  return out;
}

Result<Tensor> TransformerLayer::Backward(RuntimeContext& ctx, LayerCache& cache, Tensor dout) {
  if (!cache.dropped) {
    auto dx = Grad(ctx, cache, std::move(dout));
    cache = LayerCache{};
    return dx;
  }
  // Full recompute: rerun the forward pass from the saved input, then differentiate.
  OpRecorder::Where where = ctx.rec->where();
  OpRecorder::Where again = where;
  again.phase = Phase::kRecompute;
  ctx.rec->set_where(again);
  LayerCache full;
  auto redo = Run(ctx, std::move(cache.x), full, ctx.layout.recompute != Recompute::kSelective);
  ctx.rec->set_where(where);
  if (!redo) return redo.error();
  redo->Reset();
  cache = LayerCache{};
  auto dx = Grad(ctx, full, std::move(dout));
  return dx;
}

Result<Tensor> TransformerLayer::Grad(RuntimeContext& ctx, LayerCache& c, Tensor dout) {
  Backend& be = *ctx.backend;
  OpRecorder& rec = *ctx.rec;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens, Tl = ctx.local_tokens, D = m.head_dim();
  const int64_t nq = m.heads / ctx.tp, nkv = m.kv_heads / ctx.tp, Q = nq * D, K = nkv * D;
  const int64_t F = m.ffn_hidden / ctx.tp;
  const bool swiglu = m.mlp == MlpKind::kSwiglu;
  PX_TRY(group_->EnsureGrads(ctx));

  // MLP block: out = h + fc2(act(fc1(norm2(h)))) + b2.
  PX_ASSIGN(Tensor dh, ctx.Act(Tl * H));
  be.Copy(dh.ptr(), dout.ptr(), Tl * H);
  if (ix_.b2 >= 0) be.BiasBackward(dout.ptr(), G(ix_.b2), Tl, H);
  auto dy = LeaveRegionBackward(ctx, std::move(dout), H, layer_);
  if (!dy) return dy.error();
  PX_ASSIGN(Tensor dact, ctx.Act(T * F));
  {
    auto s = rec.Op(OpKind::kFc2, layer_);
    LinearBackward(be, dy->ptr(), c.act.ptr(), P(ix_.fc2), G(ix_.fc2), DevPtr{}, dact.ptr(), T, H, F, false);
  }
  dy->Reset();
  PX_ASSIGN(Tensor df, ctx.Act(T * F));
  Tensor dup;
  {
    auto s = rec.Op(OpKind::kAct, layer_);
    if (swiglu) {
      PX_ASSIGN(dup, ctx.Act(T * F));
      be.SwigluBackward(c.f1.ptr(), c.up.ptr(), dact.ptr(), df.ptr(), dup.ptr(), T * F);
    } else {
      be.BiasGeluBackward(c.f1.ptr(), dact.ptr(), df.ptr(), G(ix_.b1), T, F);
    }
  }
  dact.Reset();
  if (ctx.sp) {
    auto mg = Regather(ctx, c.mg_local, H, layer_);
    if (!mg) return mg.error();
    c.mg = std::move(mg).value();
    c.mg_local.Reset();
  }
  PX_ASSIGN(Tensor dmg, ctx.Act(T * H));
  {
    auto s = rec.Op(OpKind::kFc1, layer_);
    LinearBackward(be, df.ptr(), c.mg.ptr(), P(ix_.fc1), G(ix_.fc1), swiglu ? G(ix_.b1) : DevPtr{}, dmg.ptr(), T, F,
                   H, false);
    if (swiglu) LinearBackward(be, dup.ptr(), c.mg.ptr(), P(ix_.up), G(ix_.up), G(ix_.bup), dmg.ptr(), T, F, H, true);
  }
  df.Reset();
  dup.Reset();
  auto dm = EnterRegionBackward(ctx, std::move(dmg), H, layer_);
  if (!dm) return dm.error();
  {
    auto s = rec.Op(OpKind::kMlpNorm, layer_);  // the norm's input gradient joins the residual stream's dh
    PX_TRY(NormBackwardAdd(ctx, dm->ptr(), c.h.ptr(), P(ix_.ln2_w), c.n2_mean.ptr(), c.n2_rstd.ptr(), dh.ptr(),
                           G(ix_.ln2_w), G(ix_.ln2_b), Tl));
  }
  dm->Reset();

  // Attention block: h = x + wo(attn(qkv(norm1(x)))) + bo.
  PX_ASSIGN(Tensor dx, ctx.Act(Tl * H));
  be.Copy(dx.ptr(), dh.ptr(), Tl * H);
  if (ix_.bo >= 0) be.BiasBackward(dh.ptr(), G(ix_.bo), Tl, H);
  auto dof = LeaveRegionBackward(ctx, std::move(dh), H, layer_);
  if (!dof) return dof.error();
  PX_ASSIGN(Tensor dctx, ctx.Act(T * Q));
  {
    auto s = rec.Op(OpKind::kAttnOut, layer_);
    LinearBackward(be, dof->ptr(), c.ctx.ptr(), P(ix_.wo), G(ix_.wo), DevPtr{}, dctx.ptr(), T, H, Q, false);
  }
  dof->Reset();
  PX_ASSIGN(Tensor dq, ctx.Act(T * Q));
  PX_ASSIGN(Tensor dk, ctx.Act(T * K));
  PX_ASSIGN(Tensor dv, ctx.Act(T * K));
  const AttentionShape shape{ctx.batch, ctx.seq, nq, nkv, D};
  if (c.probs.empty()) {
    // Selective recompute: rebuild the attention probabilities dropped in forward.
    OpRecorder::Where where = rec.where();
    OpRecorder::Where again = where;
    again.phase = Phase::kRecompute;
    rec.set_where(again);
    PX_ASSIGN(c.probs, ctx.Act(shape.probs_floats()));
    PX_ASSIGN(Tensor scratch, ctx.Act(T * Q));
    {
      auto s = rec.Op(OpKind::kAttnCore, layer_);
      be.AttentionForward(shape, c.q.ptr(), c.k.ptr(), c.v.ptr(), scratch.ptr(), c.probs.ptr());
    }
    rec.set_where(where);
  }
  {
    auto s = rec.Op(OpKind::kAttnCore, layer_);
    be.AttentionBackward(shape, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.probs.ptr(), dctx.ptr(), dq.ptr(), dk.ptr(), dv.ptr());
  }
  dctx.Reset();
  if (ctx.sp) {
    auto ag = Regather(ctx, c.ag_local, H, layer_);
    if (!ag) return ag.error();
    c.ag = std::move(ag).value();
    c.ag_local.Reset();
  }
  PX_ASSIGN(Tensor dag, ctx.Act(T * H));
  {
    auto s = rec.Op(OpKind::kQkv, layer_);
    if (m.position == PositionKind::kRotary) {
      be.Rotary(dq.ptr(), ctx.seq, ctx.batch, nq, D, true);
      be.Rotary(dk.ptr(), ctx.seq, ctx.batch, nkv, D, true);
    }
    LinearBackward(be, dq.ptr(), c.ag.ptr(), P(ix_.wq), G(ix_.wq), G(ix_.bq), dag.ptr(), T, Q, H, false);
    LinearBackward(be, dk.ptr(), c.ag.ptr(), P(ix_.wk), G(ix_.wk), G(ix_.bk), dag.ptr(), T, K, H, true);
    LinearBackward(be, dv.ptr(), c.ag.ptr(), P(ix_.wv), G(ix_.wv), G(ix_.bv), dag.ptr(), T, K, H, true);
  }
  dq.Reset();
  dk.Reset();
  dv.Reset();
  auto da = EnterRegionBackward(ctx, std::move(dag), H, layer_);
  if (!da) return da.error();
  {
    auto s = rec.Op(OpKind::kAttnNorm, layer_);
    PX_TRY(NormBackwardAdd(ctx, da->ptr(), c.x.ptr(), P(ix_.ln1_w), c.n1_mean.ptr(), c.n1_rstd.ptr(), dx.ptr(),
                           G(ix_.ln1_w), G(ix_.ln1_b), Tl));
  }
  return dx;
}

}  // namespace parallax::executor
