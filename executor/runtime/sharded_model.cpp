#include "executor/runtime/sharded_model.h"

#include "model/schedule.h"

namespace parallax::executor {

ParamGroup* ShardedModel::AddGroup(RuntimeContext& ctx, std::string name, std::vector<ParamSpec> specs, int64_t stage,
                                   int64_t layer) {
  auto g = std::make_unique<ParamGroup>(std::move(name), std::move(specs), ctx.tp, ctx.groups->coords.tp_idx);
  g->stage = stage;
  g->layer = layer;
  ZeroConfig z{ctx.layout.zero_stage, ctx.layout.dp, ctx.groups->coords.dp_idx};
  Status st = g->Materialize(*ctx.backend, z, ctx.training.seed, ctx.compute, ctx.init_threads);
  if (!st && status_) status_ = st;
  groups_.push_back(std::move(g));
  group_ptrs_.push_back(groups_.back().get());
  return groups_.back().get();
}

Result<std::unique_ptr<ShardedModel>> ShardedModel::Build(RuntimeContext& ctx) {
  auto sm = std::unique_ptr<ShardedModel>(new ShardedModel());
  const Layout& l = ctx.layout;
  const ModelSpec& m = ctx.model;
  const int64_t stages = l.pp * l.virtual_stages;
  for (int64_t c = 0; c < l.virtual_stages; ++c) {
    Chunk ch;
    ch.stage = ModelStage(l.pp, ctx.groups->coords.pp_idx, c);
    ch.first = ch.stage == 0;
    ch.last = ch.stage == stages - 1;
    if (ch.first) {
      sm->words_ = sm->AddGroup(ctx, "word_embedding", WordEmbeddingSpecs(m), ch.stage, -1);
      ch.other_groups.push_back(sm->words_);
      if (m.position == PositionKind::kLearned) {
        sm->positions_ = sm->AddGroup(ctx, "position_embedding", PositionEmbeddingSpecs(m), ch.stage, -1);
        ch.other_groups.push_back(sm->positions_);
      }
      sm->embedding_ = std::make_unique<Embedding>(sm->words_, sm->positions_);
    }
    const LayerRange range = StageLayers(m.layers, stages, ch.stage);
    for (int64_t layer = range.first; layer < range.end(); ++layer) {
      LayerParamIndex ix;
      auto specs = LayerParamSpecs(m, layer, &ix);
      ParamGroup* g = sm->AddGroup(ctx, "layer" + std::to_string(layer), std::move(specs), ch.stage, layer);
      ch.layers.emplace_back(layer, g, ix);
    }
    if (ch.last) {
      sm->head_group_ = sm->AddGroup(ctx, "head", HeadSpecs(m), ch.stage, -1);
      ch.other_groups.push_back(sm->head_group_);
      if (m.tie_embeddings) {
        if (ch.first) {
          sm->lm_group_ = sm->words_;
        } else {
          sm->tied_pair_ = sm->AddGroup(ctx, "word_embedding", WordEmbeddingSpecs(m), ch.stage, -1);
          sm->tied_pair_->counts_in_norm = false;
          ch.other_groups.push_back(sm->tied_pair_);
          sm->lm_group_ = sm->tied_pair_;
        }
        sm->head_ = std::make_unique<Head>(sm->head_group_, sm->lm_group_, 0);
      } else {
        sm->lm_group_ = sm->head_group_;
        sm->head_ = std::make_unique<Head>(sm->head_group_, sm->head_group_, sm->head_group_->params().size() - 1);
      }
    }
    sm->chunks_.push_back(std::move(ch));
  }
  if (sm->tied_pair_ == nullptr && sm->words_ != nullptr && m.tie_embeddings && l.pp > 1) {
    sm->tied_pair_ = sm->words_;  // first stage's side of the pair
  }
  if (!sm->status_) return sm->status_.error();
  return sm;
}

}  // namespace parallax::executor
