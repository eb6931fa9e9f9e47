#include "executor/runtime/sharded_model.h"

#include "model/rank_groups.h"
#include "model/schedule.h"
#include "model/stage_split.h"

namespace parallax::executor {
namespace {

//! The parameters of a group of kind `def.kind` (a layer's also fill `ix`).
std::vector<ParamSpec> SpecsOf(const RuntimeContext& ctx, const ParamGroupDef& def, LayerParamIndex* ix) {
  const ModelSpec& m = ctx.model;
  switch (def.kind) {
    case ParamGroupKind::kWordEmbedding:
    case ParamGroupKind::kTiedEmbeddingCopy: return WordEmbeddingSpecs(m);
    case ParamGroupKind::kPositionEmbedding: return PositionEmbeddingSpecs(m);
    case ParamGroupKind::kLayer: return LayerParamSpecs(m, def.layer, ix);
    case ParamGroupKind::kHead: return HeadSpecs(m);
    case ParamGroupKind::kExperts:
      return ExpertParamSpecs(m, def.layer, ctx.layout.ep, IndexInGroup(ctx.layout, ctx.groups->coords, RankGroup::kEp));
  }
  return {};
}

}  // namespace

ParamGroup* ShardedModel::AddGroup(RuntimeContext& ctx, const ParamGroupDef& def, std::vector<ParamSpec> specs) {
  auto g = std::make_unique<ParamGroup>(def.name, std::move(specs), ctx.tp, ctx.groups->coords.tp_idx);
  g->stage = def.stage;
  g->layer = def.layer;
  g->counts_in_norm = def.counts_in_norm;
  Status st = g->Materialize(*ctx.backend, ZeroConfigFor(ctx, def), ctx.training.seed, ctx.compute, ctx.init_threads);
  if (!st && status_) status_ = st;
  groups_.push_back(std::move(g));
  group_ptrs_.push_back(groups_.back().get());
  return groups_.back().get();
}

Result<std::unique_ptr<ShardedModel>> ShardedModel::Build(RuntimeContext& ctx) {
  auto sm = std::unique_ptr<ShardedModel>(new ShardedModel());
  const Layout& l = ctx.layout;
  const ModelSpec& m = ctx.model;
  const int64_t stages = ModelStages(l);
  const std::vector<ParamGroupDef> defs =
      RankParamGroups(m, l, DefaultImplementation(), ctx.training.precision, ctx.groups->coords.pp_idx);
  size_t next = 0;
  for (int64_t c = 0; c < l.virtual_stages; ++c) {
    Chunk ch;
    ch.stage = ModelStage(l.pp, ctx.groups->coords.pp_idx, c);
    ch.first = ch.stage == 0;
    ch.last = ch.stage == stages - 1;
    for (; next < defs.size() && defs[next].chunk == c; ++next) {
      const ParamGroupDef& def = defs[next];
      LayerParamIndex ix;
      ParamGroup* g = sm->AddGroup(ctx, def, SpecsOf(ctx, def, &ix));
      if (def.kind == ParamGroupKind::kLayer) {
        if (ctx.fp8) {
          PX_ASSIGN(auto scales, Fp8Scales::Create(*ctx.backend, static_cast<int64_t>(g->params().size()),
                                                   ctx.fp8_recipe));
          g->set_fp8(std::move(scales));
        }
        ch.layers.emplace_back(def.layer, g, ix);
        continue;
      }
      if (def.kind == ParamGroupKind::kExperts) {  // listed right after its layer
        g->experts = true;
        ch.layers.back().set_experts(g);
        continue;
      }
      if (def.kind == ParamGroupKind::kWordEmbedding) sm->words_ = g;
      if (def.kind == ParamGroupKind::kPositionEmbedding) sm->positions_ = g;
      if (def.kind == ParamGroupKind::kHead) sm->head_group_ = g;
      if (def.tied_pair) sm->tied_pair_ = g;
      ch.other_groups.push_back(g);
    }
    if (ch.first) sm->embedding_ = std::make_unique<Embedding>(sm->words_, sm->positions_);
    if (ch.last) {
      // The head pass acquires its own group, then the group holding the LM weight: the head's
      // own (untied: its last parameter) or the word embedding it reads (tied: a copy when pp > 1).
      sm->lm_group_ = sm->group_ptrs_[AcquireOrder(defs, ch.stage, ChunkPass::kHead).back()];
      const size_t lm_param = sm->lm_group_ == sm->head_group_ ? sm->head_group_->params().size() - 1 : 0;
      sm->head_ = std::make_unique<Head>(sm->head_group_, sm->lm_group_, lm_param);
    }
    sm->chunks_.push_back(std::move(ch));
  }
  if (!sm->status_) return sm->status_.error();
  return sm;
}

}  // namespace parallax::executor
