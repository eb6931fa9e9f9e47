#include "executor/runtime/embedding_head.h"

#include <cmath>

#include "executor/runtime/tp_ops.h"
#include "executor/runtime/transformer_layer.h"

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

Result<Buffer> Embedding::Forward(RuntimeContext& ctx, const std::vector<int32_t>& tokens, EmbeddingCache& cache) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, T = ctx.tokens;
  const ParamSpec& w = words_->spec(0);
  cache.tokens = tokens;
  Buffer e = be.AllocateFloats(T * H, MemoryKind::kActivations);
  {
    auto s = ctx.rec->Op(OpKind::kEmbedding, -1);
    be.EmbeddingForward(tokens.data(), T, words_->param(0), w.row0, w.local_rows, H, e.f32());
  }
  auto local = LeaveRegion(ctx, std::move(e), H, -1);
  if (!local) return local.error();
  if (positions_ != nullptr) {
    // Rows are sequence-major; under SP this rank holds positions [first, first + local/batch).
    auto s = ctx.rec->Op(OpKind::kEmbedding, -1);
    const int64_t first_row = ctx.sp ? ctx.groups->coords.tp_idx * ctx.local_tokens : 0;
    const float* pos = positions_->param(0);
    for (int64_t r = 0; r < ctx.local_tokens; ++r) {
      const int64_t p = (first_row + r) / ctx.batch;
      be.Axpy(local->f32() + r * H, pos + p * H, H, 1.0f);
    }
  }
  return local;
}

Status Embedding::Backward(RuntimeContext& ctx, EmbeddingCache& cache, Buffer dout) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden;
  if (positions_ != nullptr) {
    auto s = ctx.rec->Op(OpKind::kEmbedding, -1);
    const int64_t first_row = ctx.sp ? ctx.groups->coords.tp_idx * ctx.local_tokens : 0;
    float* dpos = positions_->grad(0);
    for (int64_t r = 0; r < ctx.local_tokens; ++r) {
      const int64_t p = (first_row + r) / ctx.batch;
      be.Axpy(dpos + p * H, dout.f32() + r * H, H, 1.0f);
    }
  }
  auto full = LeaveRegionBackward(ctx, std::move(dout), H, -1);
  if (!full) return full.error();
  const ParamSpec& w = words_->spec(0);
  auto s = ctx.rec->Op(OpKind::kEmbedding, -1);
  be.EmbeddingBackward(cache.tokens.data(), ctx.tokens, full->f32(), w.row0, w.local_rows, H, words_->grad(0));
  cache = EmbeddingCache{};
  return {};
}

Result<double> Head::Forward(RuntimeContext& ctx, Buffer x, const std::vector<int32_t>& targets, HeadCache& c) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, T = ctx.tokens, Tl = ctx.local_tokens;
  const ParamSpec& lm = lm_->spec(lm_index_);
  const int64_t V = lm.local_rows;
  const auto act = MemoryKind::kActivations;
  const bool has_bias = head_->params().size() > 1 && head_->spec(1).name == "final_norm_b";
  c.x = std::move(x);
  c.targets = targets;
  Buffer z = be.AllocateFloats(Tl * H, act);
  c.mean = be.AllocateFloats(Tl, act);
  c.rstd = be.AllocateFloats(Tl, act);
  {
    auto s = ctx.rec->Op(OpKind::kFinalNorm, -1);
    NormForward(ctx, c.x.f32(), head_->param(0), has_bias ? head_->param(1) : nullptr, z.f32(), c.mean.f32(),
                c.rstd.f32(), Tl);
  }
  auto zg = EnterRegion(ctx, std::move(z), H, -1, act);
  if (!zg) return zg.error();
  c.zg = std::move(zg).value();
  c.logits = be.AllocateFloats(T * V, act);
  {
    auto s = ctx.rec->Op(OpKind::kLmHead, -1, 2.0 * static_cast<double>(T * V * H));
    LinearForward(be, c.zg.f32(), lm_->param(lm_index_), nullptr, c.logits.f32(), T, V, H);
  }
  c.row_max = be.AllocateFloats(T, act);
  c.sum_exp = be.AllocateFloats(T, act);
  Buffer stats = be.AllocateFloats(2 * T, MemoryKind::kWorkspace);  // [sum_exp | target_logit]
  {
    auto s = ctx.rec->Op(OpKind::kLoss, -1);
    be.RowMax(c.logits.f32(), T, V, c.row_max.f32());
    if (ctx.tp > 1) {
      if (Status st = ctx.tp_comm().AllReduce(c.row_max.f32(), T, ReduceOp::kMax); !st) return st.error();
    }
    be.CrossEntropyStats(c.logits.f32(), T, V, c.row_max.f32(), targets.data(), lm.row0, stats.f32(),
                         stats.f32() + T);
    if (ctx.tp > 1) {
      if (Status st = ctx.tp_comm().AllReduce(stats.f32(), 2 * T, ReduceOp::kSum); !st) return st.error();
    }
  }
  be.Copy(c.sum_exp.f32(), stats.f32(), T);
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    loss += std::log(static_cast<double>(stats.f32()[t])) + c.row_max.f32()[t] - stats.f32()[T + t];
  }
  return loss;
}

Result<Buffer> Head::Backward(RuntimeContext& ctx, HeadCache& c) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, T = ctx.tokens, Tl = ctx.local_tokens;
  const ParamSpec& lm = lm_->spec(lm_index_);
  const int64_t V = lm.local_rows;
  const auto act = MemoryKind::kActivations;
  const bool has_bias = head_->params().size() > 1 && head_->spec(1).name == "final_norm_b";
  Buffer dlogits = be.AllocateFloats(T * V, act);
  {
    auto s = ctx.rec->Op(OpKind::kLoss, -1);
    be.CrossEntropyBackward(c.logits.f32(), T, V, c.row_max.f32(), c.sum_exp.f32(), c.targets.data(), lm.row0,
                            ctx.loss_scale, dlogits.f32());
  }
  c.logits.Reset();
  Buffer dzg = be.AllocateFloats(T * H, act);
  {
    auto s = ctx.rec->Op(OpKind::kLmHead, -1, 4.0 * static_cast<double>(T * V * H));
    LinearBackward(be, dlogits.f32(), c.zg.f32(), lm_->param(lm_index_), lm_->grad(lm_index_), nullptr, dzg.f32(), T,
                   V, H, false);
  }
  dlogits.Reset();
  auto dz = EnterRegionBackward(ctx, std::move(dzg), H, -1);
  if (!dz) return dz.error();
  Buffer dx = be.AllocateFloats(Tl * H, act);
  {
    auto s = ctx.rec->Op(OpKind::kFinalNorm, -1);
    NormBackward(ctx, dz->f32(), c.x.f32(), head_->param(0), c.mean.f32(), c.rstd.f32(), dx.f32(), head_->grad(0),
                 has_bias ? head_->grad(1) : nullptr, Tl);
  }
  c = HeadCache{};
  return dx;
}

}  // namespace parallax::executor
