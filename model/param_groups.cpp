#include "model/param_groups.h"

#include <algorithm>

#include "model/counting.h"
#include "model/schedule.h"
#include "model/stage_split.h"

namespace parallax {
namespace {

int64_t LayerParams(const ModelSpec& m, const ModelCounts& c, int64_t tp) {
  const int64_t replicated = 2 * NormParams(m) + (m.bias ? 2 * m.hidden : 0);
  return (c.params_per_layer - replicated) / tp + replicated;
}

//! Op `name` of `ops` (0 when absent).
const OpCount* Find(const std::vector<OpCount>& ops, const char* name) {
  for (const OpCount& o : ops) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

}  // namespace

int64_t LayerParamsPerTpRank(const ModelSpec& m, int64_t tp, int64_t layer) {
  const std::vector<OpCount> ops = LayerOps(m, layer);
  int64_t total = 0;
  for (const OpCount& o : ops) total += o.name == "experts" ? 0 : o.params;
  int64_t replicated = 2 * NormParams(m) + (m.bias ? 2 * m.hidden : 0);
  if (const OpCount* router = Find(ops, "router")) replicated += router->params;
  if (m.mla()) {
    replicated += m.hidden * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) + m.q_lora_rank + m.kv_lora_rank;
  }
  return (total - replicated) / tp + replicated;
}

int64_t ExpertParamsPerRank(const ModelSpec& m, const Layout& l) {
  if (!m.moe()) return 0;
  const int64_t f = m.moe_ffn_hidden, h = m.hidden, etp = l.expert_tp();
  const int64_t fin = m.mlp == MlpKind::kSwiglu ? 2 * f : f;
  const int64_t one = (fin * h + f * h + (m.bias ? fin : 0)) / etp + (m.bias ? h : 0);
  return m.experts / l.ep * one;
}

int64_t ReductionGroupSize(const Layout& l, ReductionGroup g) {
  switch (g) {
    case ReductionGroup::kDpCp: return l.dp * l.cp;
    case ReductionGroup::kExpertDp: return l.expert_dp();
  }
  return l.dp;
}

ZeroSharding ZeroShardingFor(int64_t zero_stage) {
  return {.optimizer = zero_stage >= 1, .gradients = zero_stage >= 2, .weights = zero_stage >= 3};
}

ReductionGroup ReducedOver(ParamGroupKind kind) {
  return kind == ParamGroupKind::kExperts ? ReductionGroup::kExpertDp : ReductionGroup::kDpCp;
}

bool ParamGroupDef::Uses(ChunkPass p) const {
  switch (p) {
    case ChunkPass::kEmbedding: return uses_embedding;
    case ChunkPass::kLayer: return uses_layer;
    case ChunkPass::kHead: return uses_head;
  }
  return false;
}

int64_t LayerParamsPerTpRank(const ModelSpec& m, int64_t tp) { return LayerParams(m, CountParams(m), tp); }

int64_t LayerPrefetchAhead(const ImplementationProfile& impl) {
  return std::max<int64_t>(impl.zero3_prefetch_layers.value, 0);
}

std::vector<ParamGroupDef> RankParamGroups(const Plan& plan, int64_t pp_rank) {
  return RankParamGroups(plan.model, plan.layout, plan.implementation, plan.training.precision, pp_rank);
}

int64_t TotalParams(const std::vector<ParamGroupDef>& groups) {
  int64_t params = 0;
  for (const ParamGroupDef& g : groups) params += g.params;
  return params;
}

std::vector<ParamGroupDef> RankParamGroups(const ModelSpec& m, const Layout& l, const ImplementationProfile& impl,
                                           Precision precision, int64_t pp_rank) {
  const ModelCounts& c = CountParams(m);
  const int64_t stages = ModelStages(l);
  const int64_t element = BytesPerElement(precision);
  const int64_t word_embedding = m.vocab * m.hidden / l.tp;  // vocab-parallel
  const int64_t positions = c.params_embedding - m.vocab * m.hidden;
  const int64_t layer_params = LayerParams(m, c, l.tp);
  // A layer's group is layer 0's size, or (MoE) a dense or an MoE layer's dense part, each counted once.
  const bool plain = !m.moe() && !m.mla();
  const int64_t experts = ExpertParamsPerRank(m, l);
  int64_t first_dense = 0, first_moe = -1;
  while (first_dense < m.layers && IsMoeLayer(m, first_dense)) ++first_dense;
  for (int64_t i = 0; i < m.layers && first_moe < 0; ++i) first_moe = IsMoeLayer(m, i) ? i : -1;
  const int64_t dense_params =
      plain ? layer_params : first_dense < m.layers ? LayerParamsPerTpRank(m, l.tp, first_dense) : 0;
  const int64_t moe_params = first_moe >= 0 ? LayerParamsPerTpRank(m, l.tp, first_moe) : dense_params;
  std::vector<ParamGroupDef> out;
  size_t groups = 0;  // reserved up front: the search asks for every layout it prices
  for (int64_t chunk = 0; chunk < l.virtual_stages; ++chunk) {
    const int64_t stage = ModelStage(l.pp, pp_rank, chunk);
    groups += static_cast<size_t>(2 * (StageLayers(l, m.layers, stage).count + StageMtpModules(l, m.mtp_layers, stage))) + 4;
  }
  out.reserve(groups);
  // A group first read by `first` (and by the head too when `head_reuses`).
  auto add = [&](ParamGroupKind kind, std::string name, int64_t stage, int64_t chunk, int64_t params, ChunkPass first,
                 bool head_reuses) -> ParamGroupDef& {
    ParamGroupDef g;
    g.kind = kind;
    g.name = std::move(name);
    g.stage = stage;
    g.chunk = chunk;
    g.params = params;
    g.bytes = params * element;
    g.uses_embedding = first == ChunkPass::kEmbedding;
    g.uses_layer = first == ChunkPass::kLayer;
    g.uses_head = first == ChunkPass::kHead || head_reuses;
    g.first_use = first;
    g.grad_pass = first;  // a backward runs the passes in reverse: the first use adds last
    g.grad_first_pass = head_reuses ? ChunkPass::kHead : first;
    g.reduced_over = ReducedOver(kind);
    g.sharded = ZeroShardingFor(l.zero_stage);
    out.push_back(std::move(g));
    return out.back();
  };
  for (int64_t chunk = 0; chunk < l.virtual_stages; ++chunk) {
    const int64_t stage = ModelStage(l.pp, pp_rank, chunk);
    const bool first = stage == 0, last = stage == stages - 1;
    if (first) {
      // With one stage a tied LM head reads the word embedding itself; with more, the last stage's copy.
      ParamGroupDef& words = add(ParamGroupKind::kWordEmbedding, "word_embedding", stage, chunk, word_embedding,
                                 ChunkPass::kEmbedding, m.tie_embeddings && last);
      words.tied_pair = m.tie_embeddings && !last;
      if (positions > 0) {
        add(ParamGroupKind::kPositionEmbedding, "position_embedding", stage, chunk, positions, ChunkPass::kEmbedding,
            false);
      }
    }
    // A transformer layer's group (layer `index`, `params` per TP rank) and, when `moe`, its routed
    // experts' right after it.
    const auto add_layer = [&](const std::string& name, int64_t index, int64_t params, bool moe) {
      ParamGroupDef& g = add(ParamGroupKind::kLayer, name, stage, chunk, params, ChunkPass::kLayer, false);
      g.layer = index;
      g.prefetch_ahead = LayerPrefetchAhead(impl);
      if (!moe) return;
      ParamGroupDef& x = add(ParamGroupKind::kExperts, name + "_experts", stage, chunk, experts, ChunkPass::kLayer, false);
      x.layer = index;
      x.prefetch_ahead = LayerPrefetchAhead(impl);
    };
    const LayerRange range = StageLayers(l, m.layers, stage);
    for (int64_t layer = range.first; layer < range.end(); ++layer) {
      const bool moe = IsMoeLayer(m, layer);
      add_layer("layer" + std::to_string(layer), layer, moe ? moe_params : dense_params, moe);
    }
    // Multi-token prediction, on the stage StageMtpModules names: each module's own parameters
    // (MtpOwnParams) and one transformer layer of the last layer's kind, as CountParams counts them.
    // Its groups are numbered after the decoder's layers (layer m.layers + k).
    for (int64_t k = 0; k < StageMtpModules(l, m.mtp_layers, stage); ++k) {
      const int64_t like = m.layers - 1;
      add_layer("mtp" + std::to_string(k), m.layers + k, MtpOwnParams(m, l.tp) + LayerParamsPerTpRank(m, l.tp, like),
                IsMoeLayer(m, like));
    }
    if (last) {
      add(ParamGroupKind::kHead, "head", stage, chunk, c.params_final_norm + (m.tie_embeddings ? 0 : word_embedding),
          ChunkPass::kHead, false);
      if (m.tie_embeddings && !first) {
        ParamGroupDef& copy = add(ParamGroupKind::kTiedEmbeddingCopy, "word_embedding", stage, chunk, word_embedding,
                                  ChunkPass::kHead, false);
        copy.tied_pair = true;
        copy.counts_in_norm = false;
      }
    }
  }
  return out;
}

int AcquireRound(const ParamGroupDef& g, int64_t stage, ChunkPass pass) {
  if (g.stage != stage || g.kind == ParamGroupKind::kLayer || !g.Uses(pass)) return -1;
  return g.first_use == pass ? 0 : 1;
}

std::vector<size_t> AcquireOrder(const std::vector<ParamGroupDef>& groups, int64_t stage, ChunkPass pass) {
  std::vector<size_t> out;
  for (int round = 0; round < kAcquireRounds; ++round) {
    for (size_t i = 0; i < groups.size(); ++i) {
      if (AcquireRound(groups[i], stage, pass) == round) out.push_back(i);
    }
  }
  return out;
}

const char* ToString(ParamGroupKind k) {
  switch (k) {
    case ParamGroupKind::kWordEmbedding: return "word_embedding";
    case ParamGroupKind::kPositionEmbedding: return "position_embedding";
    case ParamGroupKind::kLayer: return "layer";
    case ParamGroupKind::kHead: return "head";
    case ParamGroupKind::kTiedEmbeddingCopy: return "tied_embedding_copy";
    case ParamGroupKind::kExperts: return "experts";
  }
  return "?";
}

}  // namespace parallax
