#include "executor/runtime/embedding_head.h"

#include <cmath>

#include "executor/runtime/tp_ops.h"
#include "executor/runtime/transformer_layer.h"
#include "model/cp_chunks.h"

namespace parallax::executor {

std::vector<ParamSpec> WordEmbeddingSpecs(const ModelSpec& m) {
  ParamSpec p;
  p.name = "word_embedding";
  p.rows = m.vocab;
  p.cols = m.hidden;
  p.shard = ShardDim::kRows;
  p.init = InitKind::kNormal;
  p.std = 0.02f;
  p.weight_decay = true;
  return {p};
}

std::vector<ParamSpec> PositionEmbeddingSpecs(const ModelSpec& m) {
  ParamSpec p;
  p.name = "position_embedding";
  p.rows = m.seq_len;
  p.cols = m.hidden;
  p.init = InitKind::kNormal;
  p.std = 0.01f;
  p.weight_decay = true;
  p.sequence_parallel_partial = true;
  return {p};
}

std::vector<ParamSpec> HeadSpecs(const ModelSpec& m) {
  std::vector<ParamSpec> out;
  ParamSpec w;
  w.name = "final_norm_w";
  w.cols = m.hidden;
  w.init = InitKind::kOnes;
  w.sequence_parallel_partial = true;
  out.push_back(w);
  if (m.norm == NormKind::kLayerNorm && m.bias) {
    ParamSpec b = w;
    b.name = "final_norm_b";
    b.init = InitKind::kZeros;
    out.push_back(b);
  }
  if (!m.tie_embeddings) {
    ParamSpec lm;
    lm.name = "lm_head";
    lm.rows = m.vocab;
    lm.cols = m.hidden;
    lm.shard = ShardDim::kRows;
    lm.std = 0.02f;
    lm.weight_decay = true;
    out.push_back(lm);
  }
  return out;
}

Result<Tensor> Embedding::Forward(RuntimeContext& ctx, const std::vector<int32_t>& tokens, EmbeddingCache& cache) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, T = ctx.tokens;
  const ParamSpec& w = words_->spec(0);
  PX_ASSIGN(cache.tokens, ctx.Indices(tokens));
  PX_ASSIGN(Tensor e, ctx.Act(T * H));
  {
    auto s = ctx.rec->Op(OpKind::kEmbedding, -1);
    be.EmbeddingForward({.index = cache.tokens.ptr(), .table = words_->param(0), .out = e.ptr(), .n = T,
                         .vocab_begin = w.row0, .table_rows = w.local_rows, .hidden = H});
  }
  PX_ASSIGN(Tensor local, LeaveRegion(ctx, std::move(e), H, -1));
  if (positions_ != nullptr) {
    // Rows are sequence-major; under SP this rank holds local positions [first, first + local/batch),
    // which are global positions of its cp chunks (model/cp_chunks.h).
    const int64_t first_row = ctx.sp ? ctx.groups->coords.tp_idx * ctx.local_tokens : 0;
    std::vector<int32_t> pos(static_cast<size_t>(ctx.local_tokens));
    for (int64_t r = 0; r < ctx.local_tokens; ++r) {
      pos[static_cast<size_t>(r)] =
          static_cast<int32_t>(CpGlobalPosition(ctx.seq, ctx.cp, ctx.cp_idx, (first_row + r) / ctx.batch));
    }
    PX_ASSIGN(cache.positions, ctx.Indices(pos));
    auto s = ctx.rec->Op(OpKind::kEmbedding, -1);
    be.EmbeddingForward({.index = cache.positions.ptr(), .table = positions_->param(0), .out = local.ptr(),
                         .n = ctx.local_tokens, .table_rows = positions_->spec(0).local_rows, .hidden = H,
                         .accumulate = true});
  }
  return local;
}

Status Embedding::Backward(RuntimeContext& ctx, EmbeddingCache& cache, Tensor dout) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden;
  PX_TRY(words_->EnsureGrads(ctx));
  if (positions_ != nullptr) {
    PX_TRY(positions_->EnsureGrads(ctx));
    auto s = ctx.rec->Op(OpKind::kEmbedding, -1);
    be.EmbeddingBackward({.index = cache.positions.ptr(), .dout = dout.ptr(), .dtable = positions_->grad(0),
                          .n = ctx.local_tokens, .table_rows = positions_->spec(0).local_rows, .hidden = H});
  }
  PX_ASSIGN(Tensor full, LeaveRegionBackward(ctx, std::move(dout), H, -1));
  const ParamSpec& w = words_->spec(0);
  auto s = ctx.rec->Op(OpKind::kEmbedding, -1);
  be.EmbeddingBackward({.index = cache.tokens.ptr(), .dout = full.ptr(), .dtable = words_->grad(0), .n = ctx.tokens,
                        .vocab_begin = w.row0, .table_rows = w.local_rows, .hidden = H});
  cache = EmbeddingCache{};
  return {};
}

Status Head::Forward(RuntimeContext& ctx, Tensor x, const std::vector<int32_t>& targets, HeadCache& c) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, T = ctx.tokens, Tl = ctx.local_tokens;
  const ParamSpec& lm = lm_->spec(lm_index_);
  const int64_t V = lm.local_rows;
  const bool has_bias = head_->params().size() > 1 && head_->spec(1).name == "final_norm_b";
  c.x = std::move(x);
  PX_ASSIGN(c.targets, ctx.Indices(targets));
  PX_ASSIGN(Tensor z, ctx.Act(Tl * H));
  PX_ASSIGN(c.mean, ctx.F32(Tl));
  PX_ASSIGN(c.rstd, ctx.F32(Tl));
  {
    auto s = ctx.rec->Op(OpKind::kFinalNorm, -1);
    NormForward(ctx, {.x = c.x.ptr(), .gamma = head_->param(0), .beta = has_bias ? head_->param(1) : DevPtr{},
                      .y = z.ptr(), .mean = c.mean.ptr(), .rstd = c.rstd.ptr(), .rows = Tl, .cols = H,
                      .eps = kNormEps});
  }
  PX_ASSIGN(c.zg, EnterRegion(ctx, std::move(z), H, -1));
  PX_ASSIGN(c.logits, ctx.Act(T * V));
  {
    auto s = ctx.rec->Op(OpKind::kLmHead, -1);
    LinearForward(be, {.x = c.zg.ptr(), .w = lm_->param(lm_index_), .y = c.logits.ptr(), .rows = T, .n = V, .k = H});
  }
  // Vocab-parallel cross-entropy in one pass of statistics per slice: this rank's row max, the sum
  // of exponentials relative to it and the target logit (0 off the slice), then one TP all-gather
  // of the three (the profile's loss_reduction all_gather); the backward combines them. The loss
  // slice holds kernels only, as the op catalogue counts it.
  PX_ASSIGN(Tensor stats, ctx.F32(3 * T));
  {
    auto s = ctx.rec->Op(OpKind::kLoss, -1);
    be.RowMax({.logits = c.logits.ptr(), .row_max = stats.ptr(), .rows = T, .cols = V});
    be.CrossEntropyStats({.logits = c.logits.ptr(), .row_max = stats.ptr(), .targets = c.targets.ptr(),
                          .sum_exp = stats.at(T), .target_logit = stats.at(2 * T), .rows = T, .cols = V,
                          .vocab_begin = lm.row0});
  }
  if (ctx.tp == 1) {
    c.stats = std::move(stats);
    return {};
  }
  PX_ASSIGN(c.stats, ctx.F32(3 * T * ctx.tp));
  PX_TRY(RunCollective(ctx, OpKind::kTpAllGather, -1, 3 * T * ctx.tp * 4, static_cast<int32_t>(ctx.tp),
                       [&](Stream& s) { return ctx.tp_comm().AllGather(stats.ptr(), c.stats.ptr(), 3 * T, s); }));
  return {};
}

Result<Tensor> Head::Backward(RuntimeContext& ctx, HeadCache& c) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, T = ctx.tokens, Tl = ctx.local_tokens;
  const ParamSpec& lm = lm_->spec(lm_index_);
  const int64_t V = lm.local_rows;
  const bool has_bias = head_->params().size() > 1 && head_->spec(1).name == "final_norm_b";
  PX_TRY(head_->EnsureGrads(ctx));
  PX_TRY(lm_->EnsureGrads(ctx));
  PX_ASSIGN(Tensor dlogits, ctx.Act(T * V));
  {
    PX_ASSIGN(Tensor row_max, ctx.F32(T, MemoryKind::kWorkspace));
    PX_ASSIGN(Tensor sum_exp, ctx.F32(T, MemoryKind::kWorkspace));
    auto s = ctx.rec->Op(OpKind::kLoss, -1);
    // The slices' statistics combined (this micro-batch's loss added to ctx.loss_sum), then the gradient.
    be.CrossEntropyCombine({.stats = c.stats.ptr(), .row_max = row_max.ptr(), .sum_exp = sum_exp.ptr(),
                            .loss_sum = ctx.loss_sum.ptr(), .rows = T, .parts = ctx.tp});
    const float scale = static_cast<float>(ctx.loss_scale * ctx.scaler.scale);
    be.CrossEntropyBackward({.logits = c.logits.ptr(), .row_max = row_max.ptr(), .sum_exp = sum_exp.ptr(),
                             .targets = c.targets.ptr(), .dlogits = dlogits.ptr(), .rows = T, .cols = V,
                             .vocab_begin = lm.row0, .scale = scale});
  }
  c.logits.Reset();
  c.stats.Reset();
  PX_ASSIGN(Tensor dzg, ctx.Act(T * H));
  {
    auto s = ctx.rec->Op(OpKind::kLmHead, -1);
    LinearBackward(be, {.dy = dlogits.ptr(), .x = c.zg.ptr(), .w = lm_->param(lm_index_), .dw = lm_->grad(lm_index_),
                        .dx = dzg.ptr(), .rows = T, .n = V, .k = H});
  }
  dlogits.Reset();
  PX_ASSIGN(Tensor dz, EnterRegionBackward(ctx, std::move(dzg), H, -1));
  PX_ASSIGN(Tensor dx, ctx.Act(Tl * H));
  {
    auto s = ctx.rec->Op(OpKind::kFinalNorm, -1);
    NormBackward(ctx, {.dy = dz.ptr(), .x = c.x.ptr(), .gamma = head_->param(0), .mean = c.mean.ptr(),
                       .rstd = c.rstd.ptr(), .dx = dx.ptr(), .dgamma = head_->grad(0),
                       .dbeta = has_bias ? head_->grad(1) : DevPtr{}, .rows = Tl, .cols = H});
  }
  c = HeadCache{};
  return dx;
}

}  // namespace parallax::executor
