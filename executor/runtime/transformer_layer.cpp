#include "executor/runtime/transformer_layer.h"

#include <cmath>
#include <string>

#include "executor/runtime/cp_attention.h"
#include "executor/runtime/tp_ops.h"

namespace parallax::executor {

namespace {

// Sequence parallel keeps a column-parallel GEMM's input sharded over the sequence and gathers it
// again for the weight gradient in backward (Korthikanti et al. 2022, section 4.2.2).
Result<Tensor> KeepLocalCopy(RuntimeContext& ctx, const Tensor& local, int64_t cols) {
  if (!ctx.sp) return Tensor();
  PX_ASSIGN(Tensor copy, ctx.Act(ctx.local_tokens * cols));
  ctx.backend->Copy({.dst = copy.ptr(), .src = local.ptr(), .n = ctx.local_tokens * cols});
  return copy;
}

Result<Tensor> Regather(RuntimeContext& ctx, const Tensor& local, int64_t cols, int64_t layer) {
  PX_ASSIGN(Tensor copy, KeepLocalCopy(ctx, local, cols));
  return EnterRegion(ctx, std::move(copy), cols, layer);
}

// A sub-block's pre-norm: normalises x or, with `residual` set, first forms the residual join
// h = x + residual (+ bias) in the same kernel (fused residual + norm; its time is the norm op's).
struct PreNorm {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, residual{}, bias{};
  DevPtr h{};  //!< the join's output
  DevPtr gamma{}, beta{};
};

// What a pre-norm keeps for backward, and its output: kept local (sequence parallel) and gathered
// (or passed on) into the TP region.
struct NormedInput {
  Tensor mean, rstd, local, region;
};

Result<NormedInput> NormIntoRegion(RuntimeContext& ctx, OpKind op, int64_t layer, const PreNorm& in) {
  const int64_t H = ctx.model.hidden, Tl = ctx.local_tokens;
  NormedInput out;
  PX_ASSIGN(Tensor y, ctx.Act(Tl * H));
  PX_ASSIGN(out.mean, ctx.F32(Tl));
  PX_ASSIGN(out.rstd, ctx.F32(Tl));
  {
    auto s = ctx.rec->Op(op, layer);
    if (in.residual) {
      ResidualNormForward(ctx, {.x = in.x, .residual = in.residual, .bias = in.bias, .gamma = in.gamma,
                                .beta = in.beta, .h = in.h, .y = y.ptr(), .mean = out.mean.ptr(),
                                .rstd = out.rstd.ptr(), .rows = Tl, .cols = H, .eps = kNormEps});
    } else {
      NormForward(ctx, {.x = in.x, .gamma = in.gamma, .beta = in.beta, .y = y.ptr(), .mean = out.mean.ptr(),
                        .rstd = out.rstd.ptr(), .rows = Tl, .cols = H, .eps = kNormEps});
    }
  }
  PX_ASSIGN(out.local, KeepLocalCopy(ctx, y, H));
  PX_ASSIGN(out.region, EnterRegion(ctx, std::move(y), H, layer));
  return out;
}

// The ops of its lifetime are recorded in phase recompute; the recorder's place is restored however
// the scope is left, an early error return (PX_TRY, PX_ASSIGN) included.
class RecomputePhase {
 public:
  explicit RecomputePhase(OpRecorder& rec) : rec_(rec), saved_(rec.where()) {
    OpRecorder::Where again = saved_;
    again.phase = Phase::kRecompute;
    rec_.set_where(again);
  }
  ~RecomputePhase() { rec_.set_where(saved_); }
  RecomputePhase(const RecomputePhase&) = delete;
  RecomputePhase& operator=(const RecomputePhase&) = delete;

 private:
  OpRecorder& rec_;
  OpRecorder::Where saved_;
};

// The attention core's shape on this rank: its heads over the local sequence, and the model's
// local-attention window where layer `layer` has one (model/model_spec.h IsLocalAttentionLayer).
AttentionShape CoreShape(const RuntimeContext& ctx, int64_t layer, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  const ModelSpec& m = ctx.model;
  const bool local = m.attention_window > 0 && IsLocalAttentionLayer(m, layer);
  return {.batch = ctx.batch, .seq = ctx.local_seq, .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim,
          .window = local ? m.attention_window : 0, .chunked = local && m.window_kind == WindowKind::kChunked};
}

}  // namespace

void NormForward(RuntimeContext& ctx, const NormArgs& a) {
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->LayerNormForward(a);
  } else {
    ctx.backend->RmsNormForward(a);
  }
}

void ResidualNormForward(RuntimeContext& ctx, const ResidualNormArgs& a) {
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->ResidualLayerNormForward(a);
  } else {
    ctx.backend->ResidualRmsNormForward(a);
  }
}

void NormBackwardAdd(RuntimeContext& ctx, const NormBackwardArgs& a) {
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->LayerNormBackwardAdd(a);
  } else {
    ctx.backend->RmsNormBackwardAdd(a);
  }
}

void NormBackward(RuntimeContext& ctx, const NormBackwardArgs& a) {
  if (ctx.model.norm == NormKind::kLayerNorm) {
    ctx.backend->LayerNormBackward(a);
  } else {
    ctx.backend->RmsNormBackward(a);
  }
}

void LinearForward(Backend& be, const LinearArgs& a) {
  if (a.fp8.on()) {
    Fp8LinearForward(be, a);
  } else {
    be.Gemm({.ta = Trans::kNo, .tb = Trans::kYes, .m = a.rows, .n = a.n, .k = a.k, .a = a.x, .b = a.w, .c = a.y,
             .lda = a.k, .ldb = a.k, .ldc = a.n});
  }
  if (a.bias) be.AddBias({.y = a.y, .bias = a.bias, .rows = a.rows, .cols = a.n});
}

void LinearBackward(Backend& be, const LinearBackwardArgs& a) {
  if (a.fp8.on()) {
    if (a.dbias) be.BiasBackward({.dy = a.dy, .dbias = a.dbias, .rows = a.rows, .cols = a.n});
    return Fp8LinearBackward(be, a);
  }
  // dW (fp32) += dy^T x
  be.Gemm({.ta = Trans::kYes, .m = a.n, .n = a.k, .k = a.rows, .beta = 1.0f, .a = a.dy, .b = a.x, .c = a.dw,
           .lda = a.n, .ldb = a.k, .ldc = a.k});
  if (a.dbias) be.BiasBackward({.dy = a.dy, .dbias = a.dbias, .rows = a.rows, .cols = a.n});
  if (a.dx) {
    // dx = dy W
    be.Gemm({.m = a.rows, .n = a.k, .k = a.n, .beta = a.accumulate_dx ? 1.0f : 0.0f, .a = a.dy, .b = a.w,
             .c = a.dx, .lda = a.n, .ldb = a.k, .ldc = a.k});
  }
}

std::vector<ParamSpec> LayerParamSpecs(const ModelSpec& m, int64_t layer, LayerParamIndex* ix) {
  std::vector<ParamSpec> out;
  const std::string prefix = "layer" + std::to_string(layer) + ".";
  const int64_t h = m.hidden, q = m.heads * m.head_dim(), kv = m.kv_dim(), f = MlpWidth(m, layer);
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
  if (m.mla()) {
    // Down-projections and latent norms whole on every TP rank (their gradients partial over TP: each
    // rank back-propagates its own heads), up-projections split by heads (model/param_groups.cpp).
    auto whole = [&](const std::string& name, int64_t rows, int64_t cols, InitKind init, float sd, bool decay) {
      const int i = add(name, rows, cols, ShardDim::kNone, init, sd, decay, false);
      out.back().tp_partial = true;
      return i;
    };
    const int64_t nope = m.qk_nope_head_dim, rope = m.qk_rope_head_dim, heads = m.heads;
    const int64_t q_in = m.q_lora_rank > 0 ? m.q_lora_rank : h;
    if (m.q_lora_rank > 0) {
      ix->q_down = whole("q_down", m.q_lora_rank, h, InitKind::kNormal, 0.02f, true);
      ix->q_norm = whole("q_norm", 1, m.q_lora_rank, InitKind::kOnes, 0, false);
    }
    ix->q_nope = add("q_nope", heads * nope, q_in, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    ix->q_rope = add("q_rope", heads * rope, q_in, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    ix->kv_down = whole("kv_down", m.kv_lora_rank, h, InitKind::kNormal, 0.02f, true);
    ix->k_rope = whole("k_rope", rope, h, InitKind::kNormal, 0.02f, true);
    ix->kv_norm = whole("kv_norm", 1, m.kv_lora_rank, InitKind::kOnes, 0, false);
    ix->k_up = add("k_up", heads * nope, m.kv_lora_rank, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    ix->v_up = add("v_up", heads * m.v_head_dim, m.kv_lora_rank, ShardDim::kRows, InitKind::kNormal, 0.02f, true,
                   false);
  } else {
    ix->wq = add("wq", q, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->bq = add("bq", 1, q, ShardDim::kCols, InitKind::kZeros, 0, false, false);
    ix->wk = add("wk", kv, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->bk = add("bk", 1, kv, ShardDim::kCols, InitKind::kZeros, 0, false, false);
    ix->wv = add("wv", kv, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->bv = add("bv", 1, kv, ShardDim::kCols, InitKind::kZeros, 0, false, false);
  }
  ix->wo = add("wo", h, m.attn_out_dim(), ShardDim::kCols, InitKind::kNormal, std_out, true, false);
  if (m.bias) ix->bo = add("bo", 1, h, ShardDim::kNone, InitKind::kZeros, 0, false, true);
  ix->ln2_w = add("ln2_w", 1, h, ShardDim::kNone, InitKind::kOnes, 0, false, true);
  if (ln && m.bias) ix->ln2_b = add("ln2_b", 1, h, ShardDim::kNone, InitKind::kZeros, 0, false, true);
  // An MoE layer: the router (whole on every TP rank, its gradient partial over TP) and, in place of
  // the dense MLP, its shared experts (column/row parallel like it).
  const bool moe = IsMoeLayer(m, layer);
  if (moe) {
    ix->router = add("router", m.experts, h, ShardDim::kNone, InitKind::kNormal, 0.02f, true, false);
    out.back().tp_partial = true;
  }
  const std::string mlp = moe ? "shared_" : "";
  if (MlpWidth(m, layer) == 0) return out;
  if (m.mlp == MlpKind::kSwiglu) {
    ix->fc1 = add(mlp + "fc1_gate", f, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->b1 = add(mlp + "b1_gate", 1, f, ShardDim::kCols, InitKind::kZeros, 0, false, false);
    ix->up = add(mlp + "fc1_up", f, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->bup = add(mlp + "b1_up", 1, f, ShardDim::kCols, InitKind::kZeros, 0, false, false);
  } else {
    ix->fc1 = add(mlp + "fc1", f, h, ShardDim::kRows, InitKind::kNormal, 0.02f, true, false);
    if (m.bias) ix->b1 = add(mlp + "b1", 1, f, ShardDim::kCols, InitKind::kZeros, 0, false, false);
  }
  ix->fc2 = add(mlp + "fc2", h, f, ShardDim::kCols, InitKind::kNormal, std_out, true, false);
  if (m.bias) ix->b2 = add(mlp + "b2", 1, h, ShardDim::kNone, InitKind::kZeros, 0, false, true);
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

Result<Tensor> TransformerLayer::Run(RuntimeContext& ctx, Tensor x, LayerCache& c, bool keep_stats) {
  c.x = std::move(x);
  PX_ASSIGN(Tensor attn, AttentionBlockForward(ctx, c, keep_stats));
  return MlpBlockForward(ctx, c, std::move(attn));
}

Result<Tensor> TransformerLayer::AttentionBlockForward(RuntimeContext& ctx, LayerCache& c, bool keep_stats) {
  Backend& be = *ctx.backend;
  OpRecorder& rec = *ctx.rec;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens, D = m.head_dim();
  // Multi-head latent attention: a key per head (no grouping), values padded to the query width.
  const int64_t nq = m.heads / ctx.tp, nkv = (m.mla() ? m.heads : m.kv_heads) / ctx.tp, Q = nq * D, K = nkv * D;
  const int64_t O = nq * m.value_dim();

  PX_ASSIGN(NormedInput n1, NormIntoRegion(ctx, OpKind::kAttnNorm, layer_,
                                           {.x = c.x.ptr(), .gamma = P(ix_.ln1_w), .beta = P(ix_.ln1_b)}));
  c.n1_mean = std::move(n1.mean);
  c.n1_rstd = std::move(n1.rstd);
  c.ag_local = std::move(n1.local);
  c.ag = std::move(n1.region);

  PX_ASSIGN(c.q, ctx.Act(T * Q));
  PX_ASSIGN(c.k, ctx.Act(T * K));
  PX_ASSIGN(c.v, ctx.Act(T * K));
  if (m.mla()) {
    PX_TRY(MlaProject(ctx, c));
  } else {
    auto s = rec.Op(OpKind::kQkv, layer_);
    const DevPtr in = c.ag.ptr();
    LinearForward(be, {.x = in, .w = P(ix_.wq), .bias = P(ix_.bq), .y = c.q.ptr(), .rows = T, .n = Q, .k = H,
                       .fp8 = F8(ix_.wq)});
    LinearForward(be, {.x = in, .w = P(ix_.wk), .bias = P(ix_.bk), .y = c.k.ptr(), .rows = T, .n = K, .k = H,
                       .fp8 = F8(ix_.wk)});
    LinearForward(be, {.x = in, .w = P(ix_.wv), .bias = P(ix_.bv), .y = c.v.ptr(), .rows = T, .n = K, .k = H,
                       .fp8 = F8(ix_.wv)});
    if (m.position == PositionKind::kRotary) {
      RotaryOnChunks(ctx, c.q.ptr(), nq, D, false);
      RotaryOnChunks(ctx, c.k.ptr(), nkv, D, false);
    }
  }
  if (ctx.sp) c.ag.Reset();
  const AttentionShape shape = CoreShape(ctx, layer_, nq, nkv, D);
  PX_ASSIGN(c.ctx, ctx.Act(T * Q));
  if (keep_stats || ctx.cp > 1) {  // ring attention's backward reads the merged statistics
    PX_ASSIGN(c.lse, ctx.F32(shape.stats_floats()));  // else rebuilt in backward
  }
  if (ctx.cp > 1) {
    PX_TRY(CpAttentionForward(ctx, layer_, {.shape = shape, .q = c.q.ptr(), .k = c.k.ptr(), .v = c.v.ptr(),
                                            .out = c.ctx.ptr(), .lse = c.lse.ptr()}));
  } else {
    auto s = rec.Op(OpKind::kAttnCore, layer_);
    be.AttentionForward(
        {.shape = shape, .q = c.q.ptr(), .k = c.k.ptr(), .v = c.v.ptr(), .out = c.ctx.ptr(), .lse = c.lse.ptr()});
  }
  PX_ASSIGN(Tensor o, ctx.Act(T * H));
  {
    auto s = rec.Op(OpKind::kAttnOut, layer_);
    DevPtr in = c.ctx.ptr();
    if (m.mla()) {  // the output projection reads each head's value width, not the padding
      PX_TRY(MlaNarrow(ctx, c));
      in = c.ctx_v.ptr();
    }
    LinearForward(be, {.x = in, .w = P(ix_.wo), .y = o.ptr(), .rows = T, .n = H, .k = O, .fp8 = F8(ix_.wo)});
  }
  return LeaveRegion(ctx, std::move(o), H, layer_);
}

Result<Tensor> TransformerLayer::MlpBlockForward(RuntimeContext& ctx, LayerCache& c, Tensor attn) {
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens, Tl = ctx.local_tokens;

  PX_ASSIGN(c.h, ctx.Act(Tl * H));
  // h = x + attention output + bo, fused into the MLP norm.
  PX_ASSIGN(NormedInput n2, NormIntoRegion(ctx, OpKind::kMlpNorm, layer_,
                                           {.x = attn.ptr(), .residual = c.x.ptr(), .bias = P(ix_.bo),
                                            .h = c.h.ptr(), .gamma = P(ix_.ln2_w), .beta = P(ix_.ln2_b)}));
  c.n2_mean = std::move(n2.mean);
  c.n2_rstd = std::move(n2.rstd);
  c.mg_local = std::move(n2.local);
  c.mg = std::move(n2.region);
  attn.Reset();
  PX_ASSIGN(Tensor y, DenseMlpForward(ctx, c, MlpWidth(m, layer_) / ctx.tp));
  if (experts_ != nullptr) {
    // Each TP rank routes its share of the rows; their outputs join the shared experts' partial
    // sums, so the region's exit sums them over TP with the rest.
    const int64_t rows = T / ctx.tp, r0 = ctx.groups->coords.tp_idx * rows;
    c.moe = std::make_shared<MoeCache>();
    PX_TRY(MoeForward(ctx, Moe(), c.mg.at(r0 * H), rows, y.at(r0 * H), *c.moe));
    if (ctx.sp) c.mg.Reset();
  }
  PX_ASSIGN(Tensor y2, LeaveRegion(ctx, std::move(y), H, layer_));
  PX_ASSIGN(Tensor out, ctx.Act(Tl * H));
  // out = h + MLP output + b2, one pass
  ctx.backend->ResidualAdd(
      {.x = y2.ptr(), .residual = c.h.ptr(), .bias = P(ix_.b2), .out = out.ptr(), .rows = Tl, .cols = H});
  return out;
}

Result<Tensor> TransformerLayer::DenseMlpForward(RuntimeContext& ctx, LayerCache& c, int64_t F) {
  Backend& be = *ctx.backend;
  OpRecorder& rec = *ctx.rec;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens;
  if (F == 0) return ctx.ActZeroed(T * H);
  const bool swiglu = m.mlp == MlpKind::kSwiglu;
  PX_ASSIGN(c.f1, ctx.Act(T * F));
  if (swiglu) {
    PX_ASSIGN(c.up, ctx.Act(T * F));
  }
  {
    auto s = rec.Op(OpKind::kFc1, layer_);
    // GELU: fc1's bias is added by the fused bias + GELU kernel (the act op).
    LinearForward(be, {.x = c.mg.ptr(), .w = P(ix_.fc1), .bias = swiglu ? P(ix_.b1) : DevPtr{}, .y = c.f1.ptr(),
                       .rows = T, .n = F, .k = H, .fp8 = F8(ix_.fc1)});
    if (swiglu) {
      LinearForward(be,
                    {.x = c.mg.ptr(), .w = P(ix_.up), .bias = P(ix_.bup), .y = c.up.ptr(), .rows = T, .n = F, .k = H,
                     .fp8 = F8(ix_.up)});
    }
  }
  if (ctx.sp && experts_ == nullptr) c.mg.Reset();  // an MoE layer routes c.mg after this
  PX_ASSIGN(c.act, ctx.Act(T * F));
  {
    auto s = rec.Op(OpKind::kAct, layer_);
    if (swiglu) {
      be.SwigluForward({.gate = c.f1.ptr(), .up = c.up.ptr(), .y = c.act.ptr(), .n = T * F});
    } else {
      // f1 keeps the biased pre-activation
      be.BiasGeluForward({.x = c.f1.ptr(), .bias = P(ix_.b1), .y = c.act.ptr(), .rows = T, .cols = F});
    }
  }
  PX_ASSIGN(Tensor y, ctx.Act(T * H));
  auto s = rec.Op(OpKind::kFc2, layer_);
  LinearForward(be, {.x = c.act.ptr(), .w = P(ix_.fc2), .y = y.ptr(), .rows = T, .n = H, .k = F, .fp8 = F8(ix_.fc2)});
  return y;
}

Result<Tensor> TransformerLayer::Backward(RuntimeContext& ctx, LayerCache& cache, Tensor dout) {
  if (!cache.dropped) {
    auto dx = Grad(ctx, cache, std::move(dout));
    cache = LayerCache{};
    return dx;
  }
  // Full recompute: rerun the forward pass from the saved input, then differentiate.
  LayerCache full;
  {
    RecomputePhase recompute(*ctx.rec);
    PX_ASSIGN(Tensor redo, Run(ctx, std::move(cache.x), full, ctx.layout.recompute != Recompute::kSelective));
  }
  cache = LayerCache{};
  return Grad(ctx, full, std::move(dout));
}

Result<Tensor> TransformerLayer::Grad(RuntimeContext& ctx, LayerCache& c, Tensor dout) {
  PX_TRY(group_->EnsureGrads(ctx));
  PX_ASSIGN(Tensor dh, MlpBlockGrad(ctx, c, std::move(dout)));
  return AttentionBlockGrad(ctx, c, std::move(dh));
}

// MLP block: out = h + fc2(act(fc1(norm2(h)))) (+ the routed experts) + b2.
Result<Tensor> TransformerLayer::MlpBlockGrad(RuntimeContext& ctx, LayerCache& c, Tensor dout) {
  Backend& be = *ctx.backend;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens, Tl = ctx.local_tokens;

  PX_ASSIGN(Tensor dh, ctx.Act(Tl * H));
  be.Copy({.dst = dh.ptr(), .src = dout.ptr(), .n = Tl * H});
  if (ix_.b2 >= 0) be.BiasBackward({.dy = dout.ptr(), .dbias = G(ix_.b2), .rows = Tl, .cols = H});
  PX_ASSIGN(Tensor dy, LeaveRegionBackward(ctx, std::move(dout), H, layer_));
  Tensor dmg;
  if (experts_ != nullptr) {
    const int64_t rows = T / ctx.tp, r0 = ctx.groups->coords.tp_idx * rows;
    PX_ASSIGN(dmg, ctx.ActZeroed(T * H));
    PX_TRY(MoeBackward(ctx, Moe(), dy.at(r0 * H), dmg.at(r0 * H), *c.moe));
    c.moe.reset();
  }
  PX_ASSIGN(dmg, DenseMlpGrad(ctx, c, std::move(dy), MlpWidth(m, layer_) / ctx.tp, std::move(dmg)));
  PX_ASSIGN(Tensor dm, EnterRegionBackward(ctx, std::move(dmg), H, layer_));
  {
    auto s = ctx.rec->Op(OpKind::kMlpNorm, layer_);  // the norm's input gradient joins the residual stream's dh
    NormBackwardAdd(ctx, {.dy = dm.ptr(), .x = c.h.ptr(), .gamma = P(ix_.ln2_w), .mean = c.n2_mean.ptr(),
                          .rstd = c.n2_rstd.ptr(), .dx = dh.ptr(), .dgamma = G(ix_.ln2_w), .dbeta = G(ix_.ln2_b),
                          .rows = Tl, .cols = H});
  }
  return dh;
}

Result<Tensor> TransformerLayer::DenseMlpGrad(RuntimeContext& ctx, LayerCache& c, Tensor dy, int64_t F, Tensor dmg) {
  Backend& be = *ctx.backend;
  OpRecorder& rec = *ctx.rec;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens;
  if (F == 0) return dmg.empty() ? ctx.ActZeroed(T * H) : std::move(dmg);
  const bool swiglu = m.mlp == MlpKind::kSwiglu;
  PX_ASSIGN(Tensor dact, ctx.Act(T * F));
  {
    auto s = rec.Op(OpKind::kFc2, layer_);
    LinearBackward(be, {.dy = dy.ptr(), .x = c.act.ptr(), .w = P(ix_.fc2), .dw = G(ix_.fc2), .dx = dact.ptr(),
                        .rows = T, .n = H, .k = F, .fp8 = F8(ix_.fc2)});
  }
  dy.Reset();
  PX_ASSIGN(Tensor df, ctx.Act(T * F));
  Tensor dup;
  {
    auto s = rec.Op(OpKind::kAct, layer_);
    if (swiglu) {
      PX_ASSIGN(dup, ctx.Act(T * F));
      be.SwigluBackward(
          {.gate = c.f1.ptr(), .up = c.up.ptr(), .dy = dact.ptr(), .dgate = df.ptr(), .dup = dup.ptr(), .n = T * F});
    } else {
      be.BiasGeluBackward(
          {.x = c.f1.ptr(), .dy = dact.ptr(), .dx = df.ptr(), .dbias = G(ix_.b1), .rows = T, .cols = F});
    }
  }
  dact.Reset();
  if (ctx.sp) {
    PX_ASSIGN(c.mg, Regather(ctx, c.mg_local, H, layer_));
    c.mg_local.Reset();
  }
  const bool accumulate = !dmg.empty();  // onto the routed experts' input gradient
  if (!accumulate) {
    PX_ASSIGN(dmg, ctx.Act(T * H));
  }
  auto s = rec.Op(OpKind::kFc1, layer_);
  LinearBackward(be, {.dy = df.ptr(), .x = c.mg.ptr(), .w = P(ix_.fc1), .dw = G(ix_.fc1),
                      .dbias = swiglu ? G(ix_.b1) : DevPtr{}, .dx = dmg.ptr(), .rows = T, .n = F, .k = H,
                      .accumulate_dx = accumulate, .fp8 = F8(ix_.fc1)});
  if (swiglu) {
    LinearBackward(be, {.dy = dup.ptr(), .x = c.mg.ptr(), .w = P(ix_.up), .dw = G(ix_.up), .dbias = G(ix_.bup),
                        .dx = dmg.ptr(), .rows = T, .n = F, .k = H, .accumulate_dx = true, .fp8 = F8(ix_.up)});
  }
  return dmg;
}

// Attention block: h = x + wo(attn(qkv(norm1(x)))) + bo.
Result<Tensor> TransformerLayer::AttentionBlockGrad(RuntimeContext& ctx, LayerCache& c, Tensor dh) {
  Backend& be = *ctx.backend;
  OpRecorder& rec = *ctx.rec;
  const ModelSpec& m = ctx.model;
  const int64_t H = m.hidden, T = ctx.tokens, Tl = ctx.local_tokens, D = m.head_dim();
  const int64_t nq = m.heads / ctx.tp, nkv = (m.mla() ? m.heads : m.kv_heads) / ctx.tp, Q = nq * D, K = nkv * D;
  const int64_t O = nq * m.value_dim();

  PX_ASSIGN(Tensor dx, ctx.Act(Tl * H));
  be.Copy({.dst = dx.ptr(), .src = dh.ptr(), .n = Tl * H});
  if (ix_.bo >= 0) be.BiasBackward({.dy = dh.ptr(), .dbias = G(ix_.bo), .rows = Tl, .cols = H});
  PX_ASSIGN(Tensor dof, LeaveRegionBackward(ctx, std::move(dh), H, layer_));
  PX_ASSIGN(Tensor dctx, ctx.Act(T * Q));
  {
    auto s = rec.Op(OpKind::kAttnOut, layer_);
    if (!m.mla()) {
      LinearBackward(be, {.dy = dof.ptr(), .x = c.ctx.ptr(), .w = P(ix_.wo), .dw = G(ix_.wo), .dx = dctx.ptr(),
                          .rows = T, .n = H, .k = Q, .fp8 = F8(ix_.wo)});
    } else {  // MLA: d(values' width), zero on the padding the output projection never read
      PX_ASSIGN(Tensor dctx_v, ctx.Act(T * O));
      LinearBackward(be, {.dy = dof.ptr(), .x = c.ctx_v.ptr(), .w = P(ix_.wo), .dw = G(ix_.wo), .dx = dctx_v.ptr(),
                          .rows = T, .n = H, .k = O, .fp8 = F8(ix_.wo)});
      PX_TRY(MlaWiden(ctx, c));
      be.Fill(dctx.ptr(), T * Q, 0.0f);
      be.Copy2D({.dst = dctx.ptr(), .src = dctx_v.ptr(), .rows = T * nq, .cols = m.value_dim(), .dst_ld = D,
                 .src_ld = m.value_dim()});
    }
  }
  dof.Reset();
  PX_ASSIGN(Tensor dq, ctx.Act(T * Q));
  PX_ASSIGN(Tensor dk, ctx.Act(T * K));
  PX_ASSIGN(Tensor dv, ctx.Act(T * K));
  const AttentionShape shape = CoreShape(ctx, layer_, nq, nkv, D);
  PX_TRY(AttentionCoreGrad(ctx, c,
                           {.shape = shape,
                            .q = c.q.ptr(), .k = c.k.ptr(), .v = c.v.ptr(), .out = c.ctx.ptr(), .dout = dctx.ptr(),
                            .dq = dq.ptr(), .dk = dk.ptr(), .dv = dv.ptr()}));
  dctx.Reset();
  if (ctx.sp) {
    PX_ASSIGN(c.ag, Regather(ctx, c.ag_local, H, layer_));
    c.ag_local.Reset();
  }
  PX_ASSIGN(Tensor dag, ctx.Act(T * H));
  if (m.mla()) {
    PX_TRY(MlaProjectGrad(ctx, c, dq, dk, dv, dag.ptr()));
  } else {
    auto s = rec.Op(OpKind::kQkv, layer_);
    if (m.position == PositionKind::kRotary) {
      RotaryOnChunks(ctx, dq.ptr(), nq, D, true);
      RotaryOnChunks(ctx, dk.ptr(), nkv, D, true);
    }
    const DevPtr in = c.ag.ptr();
    LinearBackward(be, {.dy = dq.ptr(), .x = in, .w = P(ix_.wq), .dw = G(ix_.wq), .dbias = G(ix_.bq),
                        .dx = dag.ptr(), .rows = T, .n = Q, .k = H, .fp8 = F8(ix_.wq)});
    LinearBackward(be, {.dy = dk.ptr(), .x = in, .w = P(ix_.wk), .dw = G(ix_.wk), .dbias = G(ix_.bk),
                        .dx = dag.ptr(), .rows = T, .n = K, .k = H, .accumulate_dx = true, .fp8 = F8(ix_.wk)});
    LinearBackward(be, {.dy = dv.ptr(), .x = in, .w = P(ix_.wv), .dw = G(ix_.wv), .dbias = G(ix_.bv),
                        .dx = dag.ptr(), .rows = T, .n = K, .k = H, .accumulate_dx = true, .fp8 = F8(ix_.wv)});
  }
  dq.Reset();
  dk.Reset();
  dv.Reset();
  PX_ASSIGN(Tensor da, EnterRegionBackward(ctx, std::move(dag), H, layer_));
  {
    auto s = rec.Op(OpKind::kAttnNorm, layer_);
    NormBackwardAdd(ctx, {.dy = da.ptr(), .x = c.x.ptr(), .gamma = P(ix_.ln1_w), .mean = c.n1_mean.ptr(),
                          .rstd = c.n1_rstd.ptr(), .dx = dx.ptr(), .dgamma = G(ix_.ln1_w), .dbeta = G(ix_.ln1_b),
                          .rows = Tl, .cols = H});
  }
  return dx;
}

Status TransformerLayer::AttentionCoreGrad(RuntimeContext& ctx, LayerCache& c, AttentionBackwardArgs a) {
  Backend& be = *ctx.backend;
  if (ctx.cp > 1) {
    return CpAttentionBackward(ctx, layer_, {.shape = a.shape, .q = a.q, .k = a.k, .v = a.v, .out = a.out,
                                             .lse = c.lse.ptr(), .dout = a.dout, .dq = a.dq, .dk = a.dk, .dv = a.dv});
  }
  if (c.lse.empty()) {
    // Selective recompute: rebuild the attention statistics dropped in forward (the output is the
    // cache's already; the rerun's copy is scratch).
    RecomputePhase recompute(*ctx.rec);
    PX_ASSIGN(c.lse, ctx.F32(a.shape.stats_floats()));
    PX_ASSIGN(Tensor scratch, ctx.Act(a.shape.q_elements()));
    auto s = ctx.rec->Op(OpKind::kAttnCore, layer_);
    be.AttentionForward({.shape = a.shape, .q = a.q, .k = a.k, .v = a.v, .out = scratch.ptr(), .lse = c.lse.ptr()});
  }
  a.lse = c.lse.ptr();
  auto s = ctx.rec->Op(OpKind::kAttnCore, layer_);
  be.AttentionBackward(a);
  return {};
}

}  // namespace parallax::executor
