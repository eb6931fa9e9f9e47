#include "executor/runtime/transformer_layer.h"

#include <cmath>
#include <string>

#include "executor/runtime/tp_ops.h"

namespace parallax::executor {

namespace {

// Sequence parallel keeps a column-parallel GEMM's input sharded over the sequence and gathers it
// again for the weight gradient in backward (Korthikanti et al. 2022, section 4.2.2).
Buffer KeepLocalCopy(RuntimeContext& ctx, const Buffer& local, int64_t cols) {
  if (!ctx.sp) return Buffer();
  Buffer copy = ctx.backend->AllocateFloats(ctx.local_tokens * cols, MemoryKind::kActivations);
  ctx.backend->Copy(copy.f32(), local.f32(), ctx.local_tokens * cols);
  return copy;
}

Result<Buffer> Regather(RuntimeContext& ctx, const Buffer& local, int64_t cols, int64_t layer) {
  Buffer copy = KeepLocalCopy(ctx, local, cols);
  return EnterRegion(ctx, std::move(copy), cols, layer, MemoryKind::kActivations);
}

constexpr float kNormEps = 1e-5f;

// A sub-block's pre-norm and its entry into the TP region: `mean`/`rstd` kept for backward, the
// normalised input kept local (sequence parallel) and gathered (or passed on) into `region`.
Status NormIntoRegion(RuntimeContext& ctx, OpKind op, int64_t layer, const float* x, const float* gamma,
                      const float* beta, Buffer& mean, Buffer& rstd, Buffer& local, Buffer& region) {
  const int64_t H = ctx.model.hidden, Tl = ctx.local_tokens;
  const auto act = MemoryKind::kActivations;
  Buffer y = ctx.backend->AllocateFloats(Tl * H, act);
  mean = ctx.backend->AllocateFloats(Tl, act);
  rstd = ctx.backend->AllocateFloats(Tl, act);
  {
    auto s = ctx.rec->Op(op, layer);
    NormForward(ctx, x, gamma, beta, y.f32(), mean.f32(), rstd.f32(), Tl);
  }
  local = KeepLocalCopy(ctx, y, H);
  auto gathered = EnterRegion(ctx, std::move(y), H, layer, act);
  if (!gathered) return gathered.error();
  region = std::move(gathered).value();
  return {};
}
}

void NormForward(RuntimeContext& ctx, const float* x, const float* gamma, const float* beta, float* y, float* mean,
                 float* rstd, int64_t rows) {
  const int64_t h = ctx.model.hidden;
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->LayerNormForward(x, gamma, beta, y, mean, rstd, rows, h, kNormEps);
  } else {
    ctx.backend->RmsNormForward(x, gamma, y, rstd, rows, h, kNormEps);
  }
}

void NormBackward(RuntimeContext& ctx, const float* dy, const float* x, const float* gamma, const float* mean,
                  const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows) {
  const int64_t h = ctx.model.hidden;
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->LayerNormBackward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, h);
  } else {
    ctx.backend->RmsNormBackward(dy, x, gamma, rstd, dx, dgamma, rows, h);
  }
}

void LinearForward(Backend& be, const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t n,
                   int64_t k) {
  be.Gemm(Trans::kNo, Trans::kYes, rows, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
  if (bias) be.AddBias(y, bias, rows, n);
}

void LinearBackward(Backend& be, const float* dy, const float* x, const float* w, float* dw, float* dbias, float* dx,
                    int64_t rows, int64_t n, int64_t k, bool accumulate_dx) {
  be.Gemm(Trans::kYes, Trans::kNo, n, k, rows, 1.0f, dy, n, x, k, 1.0f, dw, k);
  if (dbias) be.BiasBackward(dy, dbias, rows, n);
  if (dx) be.Gemm(Trans::kNo, Trans::kNo, rows, k, n, 1.0f, dy, n, w, k, accumulate_dx ? 1.0f : 0.0f, dx, k);
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

Result<Buffer> TransformerLayer::Forward(RuntimeContext& ctx, Buffer x, LayerCache& cache) {
  const Recompute mode = ctx.layout.recompute;
  auto out = Run(ctx, std::move(x), cache, mode == Recompute::kNone);
  if (out && mode == Recompute::kFull) {
    Buffer keep = std::move(cache.x);
    cache = LayerCache{};
    cache.x = std::move(keep);
    cache.dropped = true;
  }
  return out;
}

Result<Buffer> TransformerLayer::Run(RuntimeContext& ctx, Buffer x, LayerCache& c, bool keep_probs) {
  Backend& be = *ctx.backend;
  OpRecorder& rec = *ctx.rec;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens, Tl = ctx.local_tokens, D = m.head_dim();
  const int64_t nq = m.heads / ctx.tp, nkv = m.kv_heads / ctx.tp, Q = nq * D, K = nkv * D;
  const int64_t F = m.ffn_hidden / ctx.tp;
  const auto act = MemoryKind::kActivations;
  const double t = static_cast<double>(T);
  c.x = std::move(x);

  if (Status st = NormIntoRegion(ctx, OpKind::kAttnNorm, layer_, c.x.f32(), P(ix_.ln1_w), P(ix_.ln1_b), c.n1_mean,
                                 c.n1_rstd, c.ag_local, c.ag);
      !st) {
    return st.error();
  }

  c.q = be.AllocateFloats(T * Q, act);
  c.k = be.AllocateFloats(T * K, act);
  c.v = be.AllocateFloats(T * K, act);
  {
    auto s = rec.Op(OpKind::kQkv, layer_, 2.0 * t * static_cast<double>(H * (Q + 2 * K)));
    LinearForward(be, c.ag.f32(), P(ix_.wq), P(ix_.bq), c.q.f32(), T, Q, H);
    LinearForward(be, c.ag.f32(), P(ix_.wk), P(ix_.bk), c.k.f32(), T, K, H);
    LinearForward(be, c.ag.f32(), P(ix_.wv), P(ix_.bv), c.v.f32(), T, K, H);
    if (m.position == PositionKind::kRotary) {
      be.Rotary(c.q.f32(), ctx.seq, ctx.batch, nq, D, false);
      be.Rotary(c.k.f32(), ctx.seq, ctx.batch, nkv, D, false);
    }
  }
  if (ctx.sp) c.ag.Reset();
  const AttentionShape shape{ctx.batch, ctx.seq, nq, nkv, D};
  c.ctx = be.AllocateFloats(T * Q, act);
  if (keep_probs) c.probs = be.AllocateFloats(shape.probs_floats(), act);
  {
    auto s = rec.Op(OpKind::kAttnCore, layer_,
                    2.0 * static_cast<double>(ctx.batch * nq * ctx.seq * ctx.seq * D));  // causal half of 4bs^2d
    be.AttentionForward(shape, c.q.f32(), c.k.f32(), c.v.f32(), c.ctx.f32(), keep_probs ? c.probs.f32() : nullptr);
  }
  Buffer o = be.AllocateFloats(T * H, act);
  {
    auto s = rec.Op(OpKind::kAttnOut, layer_, 2.0 * t * static_cast<double>(Q * H));
    LinearForward(be, c.ctx.f32(), P(ix_.wo), nullptr, o.f32(), T, H, Q);
  }
  auto o2 = LeaveRegion(ctx, std::move(o), H, layer_);
  if (!o2) return o2.error();
  c.h = be.AllocateFloats(Tl * H, act);
  be.Copy(c.h.f32(), c.x.f32(), Tl * H);
  be.Axpy(c.h.f32(), o2->f32(), Tl * H, 1.0f);
  if (ix_.bo >= 0) be.AddBias(c.h.f32(), P(ix_.bo), Tl, H);
  o2->Reset();

  if (Status st = NormIntoRegion(ctx, OpKind::kMlpNorm, layer_, c.h.f32(), P(ix_.ln2_w), P(ix_.ln2_b), c.n2_mean,
                                 c.n2_rstd, c.mg_local, c.mg);
      !st) {
    return st.error();
  }
  const bool swiglu = m.mlp == MlpKind::kSwiglu;
  c.f1 = be.AllocateFloats(T * F, act);
  if (swiglu) c.up = be.AllocateFloats(T * F, act);
  {
    auto s = rec.Op(OpKind::kFc1, layer_, 2.0 * t * static_cast<double>(H * F * (swiglu ? 2 : 1)));
    LinearForward(be, c.mg.f32(), P(ix_.fc1), P(ix_.b1), c.f1.f32(), T, F, H);
    if (swiglu) LinearForward(be, c.mg.f32(), P(ix_.up), P(ix_.bup), c.up.f32(), T, F, H);
  }
  if (ctx.sp) c.mg.Reset();
  c.act = be.AllocateFloats(T * F, act);
  {
    auto s = rec.Op(OpKind::kAct, layer_);
    if (swiglu) {
      be.SwigluForward(c.f1.f32(), c.up.f32(), c.act.f32(), T * F);
    } else {
      be.GeluForward(c.f1.f32(), c.act.f32(), T * F);
    }
  }
  Buffer y = be.AllocateFloats(T * H, act);
  {
    auto s = rec.Op(OpKind::kFc2, layer_, 2.0 * t * static_cast<double>(F * H));
    LinearForward(be, c.act.f32(), P(ix_.fc2), nullptr, y.f32(), T, H, F);
  }
  auto y2 = LeaveRegion(ctx, std::move(y), H, layer_);
  if (!y2) return y2.error();
  Buffer out = be.AllocateFloats(Tl * H, act);
  be.Copy(out.f32(), c.h.f32(), Tl * H);
  be.Axpy(out.f32(), y2->f32(), Tl * H, 1.0f);
  if (ix_.b2 >= 0) be.AddBias(out.f32(), P(ix_.b2), Tl, H);
  return out;
}

Result<Buffer> TransformerLayer::Backward(RuntimeContext& ctx, LayerCache& cache, Buffer dout) {
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

Result<Buffer> TransformerLayer::Grad(RuntimeContext& ctx, LayerCache& c, Buffer dout) {
  Backend& be = *ctx.backend;
  OpRecorder& rec = *ctx.rec;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens, Tl = ctx.local_tokens, D = m.head_dim();
  const int64_t nq = m.heads / ctx.tp, nkv = m.kv_heads / ctx.tp, Q = nq * D, K = nkv * D;
  const int64_t F = m.ffn_hidden / ctx.tp;
  const auto act = MemoryKind::kActivations;
  const double t = static_cast<double>(T);
  const bool swiglu = m.mlp == MlpKind::kSwiglu;

  // MLP block: out = h + fc2(act(fc1(norm2(h)))) + b2.
  Buffer dh = be.AllocateFloats(Tl * H, act);
  be.Copy(dh.f32(), dout.f32(), Tl * H);
  if (ix_.b2 >= 0) be.BiasBackward(dout.f32(), G(ix_.b2), Tl, H);
  auto dy = LeaveRegionBackward(ctx, std::move(dout), H, layer_);
  if (!dy) return dy.error();
  Buffer dact = be.AllocateFloats(T * F, act);
  {
    auto s = rec.Op(OpKind::kFc2, layer_, 4.0 * t * static_cast<double>(F * H));
    LinearBackward(be, dy->f32(), c.act.f32(), P(ix_.fc2), G(ix_.fc2), nullptr, dact.f32(), T, H, F, false);
  }
  dy->Reset();
  Buffer df = be.AllocateFloats(T * F, act);
  Buffer dup;
  {
    auto s = rec.Op(OpKind::kAct, layer_);
    if (swiglu) {
      dup = be.AllocateFloats(T * F, act);
      be.SwigluBackward(c.f1.f32(), c.up.f32(), dact.f32(), df.f32(), dup.f32(), T * F);
    } else {
      be.GeluBackward(c.f1.f32(), dact.f32(), df.f32(), T * F);
    }
  }
  dact.Reset();
  if (ctx.sp) {
    auto mg = Regather(ctx, c.mg_local, H, layer_);
    if (!mg) return mg.error();
    c.mg = std::move(mg).value();
    c.mg_local.Reset();
  }
  Buffer dmg = be.AllocateFloats(T * H, act);
  {
    auto s = rec.Op(OpKind::kFc1, layer_, 4.0 * t * static_cast<double>(H * F * (swiglu ? 2 : 1)));
    LinearBackward(be, df.f32(), c.mg.f32(), P(ix_.fc1), G(ix_.fc1), G(ix_.b1), dmg.f32(), T, F, H, false);
    if (swiglu) LinearBackward(be, dup.f32(), c.mg.f32(), P(ix_.up), G(ix_.up), G(ix_.bup), dmg.f32(), T, F, H, true);
  }
  df.Reset();
  dup.Reset();
  auto dm = EnterRegionBackward(ctx, std::move(dmg), H, layer_);
  if (!dm) return dm.error();
  {
    Buffer tmp = be.AllocateFloats(Tl * H, act);
    auto s = rec.Op(OpKind::kMlpNorm, layer_);
    NormBackward(ctx, dm->f32(), c.h.f32(), P(ix_.ln2_w), c.n2_mean.f32(), c.n2_rstd.f32(), tmp.f32(), G(ix_.ln2_w),
                 G(ix_.ln2_b), Tl);
    be.Axpy(dh.f32(), tmp.f32(), Tl * H, 1.0f);
  }
  dm->Reset();

  // Attention block: h = x + wo(attn(qkv(norm1(x)))) + bo.
  Buffer dx = be.AllocateFloats(Tl * H, act);
  be.Copy(dx.f32(), dh.f32(), Tl * H);
  if (ix_.bo >= 0) be.BiasBackward(dh.f32(), G(ix_.bo), Tl, H);
  auto dof = LeaveRegionBackward(ctx, std::move(dh), H, layer_);
  if (!dof) return dof.error();
  Buffer dctx = be.AllocateFloats(T * Q, act);
  {
    auto s = rec.Op(OpKind::kAttnOut, layer_, 4.0 * t * static_cast<double>(Q * H));
    LinearBackward(be, dof->f32(), c.ctx.f32(), P(ix_.wo), G(ix_.wo), nullptr, dctx.f32(), T, H, Q, false);
  }
  dof->Reset();
  Buffer dq = be.AllocateFloats(T * Q, act), dk = be.AllocateFloats(T * K, act), dv = be.AllocateFloats(T * K, act);
  const AttentionShape shape{ctx.batch, ctx.seq, nq, nkv, D};
  if (c.probs.empty()) {
    // Selective recompute: rebuild the attention probabilities dropped in forward.
    OpRecorder::Where where = rec.where();
    OpRecorder::Where again = where;
    again.phase = Phase::kRecompute;
    rec.set_where(again);
    c.probs = be.AllocateFloats(shape.probs_floats(), act);
    Buffer scratch = be.AllocateFloats(T * Q, act);
    {
      auto s = rec.Op(OpKind::kAttnCore, layer_, 2.0 * static_cast<double>(ctx.batch * nq * ctx.seq * ctx.seq * D));
      be.AttentionForward(shape, c.q.f32(), c.k.f32(), c.v.f32(), scratch.f32(), c.probs.f32());
    }
    rec.set_where(where);
  }
  {
    auto s = rec.Op(OpKind::kAttnCore, layer_, 4.0 * static_cast<double>(ctx.batch * nq * ctx.seq * ctx.seq * D));
    be.AttentionBackward(shape, c.q.f32(), c.k.f32(), c.v.f32(), c.probs.f32(), dctx.f32(), dq.f32(), dk.f32(), dv.f32());
  }
  dctx.Reset();
  if (ctx.sp) {
    auto ag = Regather(ctx, c.ag_local, H, layer_);
    if (!ag) return ag.error();
    c.ag = std::move(ag).value();
    c.ag_local.Reset();
  }
  Buffer dag = be.AllocateFloats(T * H, act);
  {
    auto s = rec.Op(OpKind::kQkv, layer_, 4.0 * t * static_cast<double>(H * (Q + 2 * K)));
    if (m.position == PositionKind::kRotary) {
      be.Rotary(dq.f32(), ctx.seq, ctx.batch, nq, D, true);
      be.Rotary(dk.f32(), ctx.seq, ctx.batch, nkv, D, true);
    }
    LinearBackward(be, dq.f32(), c.ag.f32(), P(ix_.wq), G(ix_.wq), G(ix_.bq), dag.f32(), T, Q, H, false);
    LinearBackward(be, dk.f32(), c.ag.f32(), P(ix_.wk), G(ix_.wk), G(ix_.bk), dag.f32(), T, K, H, true);
    LinearBackward(be, dv.f32(), c.ag.f32(), P(ix_.wv), G(ix_.wv), G(ix_.bv), dag.f32(), T, K, H, true);
  }
  dq.Reset();
  dk.Reset();
  dv.Reset();
  auto da = EnterRegionBackward(ctx, std::move(dag), H, layer_);
  if (!da) return da.error();
  {
    Buffer tmp = be.AllocateFloats(Tl * H, act);
    auto s = rec.Op(OpKind::kAttnNorm, layer_);
    NormBackward(ctx, da->f32(), c.x.f32(), P(ix_.ln1_w), c.n1_mean.f32(), c.n1_rstd.f32(), tmp.f32(), G(ix_.ln1_w),
                 G(ix_.ln1_b), Tl);
    be.Axpy(dx.f32(), tmp.f32(), Tl * H, 1.0f);
  }
  return dx;
}

}  // namespace parallax::executor
