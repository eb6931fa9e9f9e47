// Parameter groups (model/param_groups.h): which groups each pipeline rank holds, in which order,
// and what each says about its passes, reduction, sharding and norm membership.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/counting.h"
#include "model/implementation.h"
#include "model/param_groups.h"
#include "model/presets.h"
#include "model/stage_split.h"

namespace parallax {
namespace {

Layout MakeLayout(int64_t pp, int64_t virtual_stages = 1, int64_t tp = 1, int64_t zero = 0) {
  Layout l;
  l.pp = pp;
  l.tp = tp;
  l.zero_stage = zero;
  l.virtual_stages = virtual_stages;
  l.schedule = virtual_stages > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
  return l;
}

std::vector<ParamGroupDef> Groups(const ModelSpec& m, const Layout& l, int64_t pp_rank,
                                  Precision precision = Precision::kBf16) {
  return RankParamGroups(m, l, DefaultImplementation(), precision, pp_rank);
}

std::vector<std::string> Names(const std::vector<ParamGroupDef>& groups) {
  std::vector<std::string> out;
  out.reserve(groups.size());
  for (const ParamGroupDef& g : groups) out.push_back(g.name + "@" + std::to_string(g.stage));
  return out;
}

TEST(ParamGroups, OneStageListsEmbeddingLayersThenHead) {
  ModelSpec m = ModelPreset("gpt-tiny").value();
  m.layers = 3;
  const auto g = Groups(m, MakeLayout(1), 0);
  EXPECT_EQ(Names(g), (std::vector<std::string>{"word_embedding@0", "position_embedding@0", "layer0@0", "layer1@0",
                                                "layer2@0", "head@0"}));
  // The tied head reads the word embedding itself: its backward adds to that gradient first.
  EXPECT_TRUE(g[0].uses_embedding && g[0].uses_head);
  EXPECT_EQ(g[0].first_use, ChunkPass::kEmbedding);
  EXPECT_EQ(g[0].grad_first_pass, ChunkPass::kHead);
  EXPECT_EQ(g[0].grad_pass, ChunkPass::kEmbedding);
  EXPECT_FALSE(g[0].tied_pair);
  for (const ParamGroupDef& d : g) {
    EXPECT_TRUE(d.counts_in_norm) << d.name;
    EXPECT_EQ(d.reduced_over, ReductionGroup::kDpCp) << d.name;
    EXPECT_EQ(d.layer >= 0, d.kind == ParamGroupKind::kLayer) << d.name;
  }
  EXPECT_EQ(g[2].layer, 0);
  EXPECT_EQ(g[5].kind, ParamGroupKind::kHead);
  EXPECT_EQ(g[5].first_use, ChunkPass::kHead);
}

TEST(ParamGroups, TiedEmbeddingAcrossStagesKeepsACopyOnTheLastStage) {
  const ModelSpec m = ModelPreset("gpt-tiny").value();  // 4 layers, tied, learned positions
  const Layout l = MakeLayout(2);
  const auto first = Groups(m, l, 0), last = Groups(m, l, 1);
  EXPECT_EQ(Names(first),
            (std::vector<std::string>{"word_embedding@0", "position_embedding@0", "layer0@0", "layer1@0"}));
  EXPECT_EQ(Names(last), (std::vector<std::string>{"layer2@1", "layer3@1", "head@1", "word_embedding@1"}));
  EXPECT_TRUE(first[0].tied_pair);
  EXPECT_FALSE(first[0].uses_head);
  EXPECT_EQ(first[0].grad_first_pass, ChunkPass::kEmbedding);
  const ParamGroupDef& copy = last.back();
  EXPECT_EQ(copy.kind, ParamGroupKind::kTiedEmbeddingCopy);
  EXPECT_TRUE(copy.tied_pair);
  EXPECT_FALSE(copy.counts_in_norm);  // the first stage counts the summed gradient
  EXPECT_EQ(copy.params, first[0].params);
  EXPECT_EQ(copy.first_use, ChunkPass::kHead);
  EXPECT_EQ(last[2].params, CountModel(m).params_final_norm);
}

TEST(ParamGroups, UntiedHeadHoldsItsLmWeightAndRotaryModelsHaveNoPositions) {
  const ModelSpec m = ModelPreset("llama-7b").value();  // untied, rotary
  const Layout l = MakeLayout(2, 1, /*tp=*/4);
  const auto first = Groups(m, l, 0), last = Groups(m, l, 1);
  EXPECT_EQ(first.front().name, "word_embedding");
  EXPECT_EQ(first[1].kind, ParamGroupKind::kLayer);  // no position embedding
  EXPECT_EQ(last.back().kind, ParamGroupKind::kHead);  // no tied copy
  EXPECT_EQ(last.back().params, CountModel(m).params_final_norm + m.vocab * m.hidden / 4);
  EXPECT_FALSE(first.front().tied_pair);
  EXPECT_FALSE(first.front().uses_head);
}

TEST(ParamGroups, InterleavedChunksListTheirGroupsChunkByChunk) {
  ModelSpec m = ModelPreset("gpt-tiny").value();
  m.layers = 8;
  const Layout l = MakeLayout(2, 2);
  EXPECT_EQ(Names(Groups(m, l, 0)), (std::vector<std::string>{"word_embedding@0", "position_embedding@0", "layer0@0",
                                                               "layer1@0", "layer4@2", "layer5@2"}));
  const auto last = Groups(m, l, 1);
  EXPECT_EQ(Names(last),
            (std::vector<std::string>{"layer2@1", "layer3@1", "layer6@3", "layer7@3", "head@3", "word_embedding@3"}));
  EXPECT_EQ(last.front().chunk, 0);
  EXPECT_EQ(last.back().chunk, 1);
}

TEST(ParamGroups, ParametersAddUpToTheModelsCount) {
  for (const char* name : {"gpt-tiny", "gpt-1.3b", "llama-7b", "llama3-8b"}) {
    const ModelSpec m = ModelPreset(name).value();
    const ModelCounts c = CountModel(m);
    for (int64_t pp : {1, 2, 4}) {
      const Layout l = MakeLayout(pp);
      int64_t total = 0;
      for (int64_t r = 0; r < pp; ++r) total += TotalParams(Groups(m, l, r));
      // With pp > 1 a tied word embedding is held twice (Megatron's copy on the last stage).
      const int64_t copy = m.tie_embeddings && pp > 1 ? m.vocab * m.hidden : 0;
      EXPECT_EQ(total, c.params_total + copy) << name << " pp=" << pp;
    }
    // Per TP rank: the layers' split parameters divide by tp, norms and row-parallel biases do not.
    EXPECT_EQ(LayerParamsPerTpRank(m, 1), c.params_per_layer) << name;
    EXPECT_LT(LayerParamsPerTpRank(m, 2), c.params_per_layer) << name;
    EXPECT_GT(2 * LayerParamsPerTpRank(m, 2), c.params_per_layer) << name;
  }
}

// DeepSeek-V3's multi-token-prediction module (mtp_layers 1) is held by the stage Megatron-Core
// builds it on: the last without a pipeline layout, the one whose entry has 'm' with one. Over the
// ranks the groups add up to the model's count with the module's (CountParams' params_mtp).
TEST(ParamGroups, MultiTokenPredictionSitsOnItsStageAndCountsAsCountParamsSays) {
  const ModelSpec m = ModelPreset("deepseek-v3").value();
  const ModelCounts c = CountModel(m);
  Layout l = MakeLayout(4);
  int64_t total = 0;
  for (int64_t r = 0; r < 4; ++r) {
    const auto groups = Groups(m, l, r);
    total += TotalParams(groups);
    const auto names = Names(groups);
    const bool has = std::find(names.begin(), names.end(), "mtp0@" + std::to_string(r)) != names.end();
    EXPECT_EQ(has, r == 3) << r;
    EXPECT_EQ(std::find(names.begin(), names.end(), "mtp0_experts@" + std::to_string(r)) != names.end(), r == 3) << r;
    EXPECT_EQ(StageMtpModules(l, m.mtp_layers, r), r == 3 ? 1 : 0);
  }
  EXPECT_EQ(total, c.params_total + c.params_mtp);
  // NVIDIA's recipe layout puts it beside the last decoder layer and the loss; a layout may place it
  // on an earlier stage too (after the last decoder layer, as Megatron-Core checks).
  l.pipeline_layout = "Et*15|t*16|t*16|t*14mL";
  EXPECT_EQ(StageMtpModules(l, m.mtp_layers, 3), 1);
  l.pipeline_layout = "Et*15|t*16|t*16|t*14m|L";
  l.pp = 5;
  EXPECT_EQ(StageMtpModules(l, m.mtp_layers, 3), 1);
  EXPECT_EQ(StageMtpModules(l, m.mtp_layers, 4), 0);
  EXPECT_EQ(StageMtpModules(l, 0, 3), 0);
}

TEST(ParamGroups, BytesFollowThePrecisionAndPrefetchTheProfile) {
  const ModelSpec m = ModelPreset("gpt-tiny").value();
  const Layout l = MakeLayout(1, 1, 1, /*zero=*/3);
  const auto fp32 = Groups(m, l, 0, Precision::kFp32), bf16 = Groups(m, l, 0, Precision::kBf16);
  ASSERT_EQ(fp32.size(), bf16.size());
  for (size_t i = 0; i < fp32.size(); ++i) {
    EXPECT_EQ(fp32[i].bytes, 4 * fp32[i].params);
    EXPECT_EQ(bf16[i].bytes, 2 * bf16[i].params);
    EXPECT_EQ(bf16[i].sharded, ZeroShardingFor(3));
    // Layers are gathered one ahead by our executor; the embedding and head when their pass runs.
    EXPECT_EQ(bf16[i].prefetch_ahead, bf16[i].kind == ParamGroupKind::kLayer ? 1 : 0) << bf16[i].name;
  }
  ImplementationProfile none = DefaultImplementation();
  none.zero3_prefetch_layers.value = 0;
  for (const ParamGroupDef& g : RankParamGroups(m, l, none, Precision::kBf16, 0)) EXPECT_EQ(g.prefetch_ahead, 0);
}

TEST(ParamGroups, ZeroStagesShardOptimizerThenGradientsThenWeights) {
  EXPECT_EQ(ZeroShardingFor(0), (ZeroSharding{}));
  EXPECT_EQ(ZeroShardingFor(1), (ZeroSharding{.optimizer = true}));
  EXPECT_EQ(ZeroShardingFor(2), (ZeroSharding{.optimizer = true, .gradients = true}));
  EXPECT_EQ(ZeroShardingFor(3), (ZeroSharding{.optimizer = true, .gradients = true, .weights = true}));
}

TEST(ParamGroups, HeadAcquiresItsOwnGroupBeforeTheWordEmbeddingItReads) {
  const ModelSpec m = ModelPreset("gpt-tiny").value();
  const auto one = Groups(m, MakeLayout(1), 0);
  // word_embedding, position_embedding, layer0..3, head
  EXPECT_EQ(AcquireOrder(one, 0, ChunkPass::kEmbedding), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(AcquireOrder(one, 0, ChunkPass::kHead), (std::vector<size_t>{6, 0}));
  EXPECT_EQ(AcquireRound(one[0], 0, ChunkPass::kHead), 1);
  EXPECT_EQ(AcquireRound(one[2], 0, ChunkPass::kLayer), -1);  // layers are acquired by their own layer
  const auto last = Groups(m, MakeLayout(2), 1);  // layer2, layer3, head, copy
  EXPECT_EQ(AcquireOrder(last, 1, ChunkPass::kHead), (std::vector<size_t>{2, 3}));
  EXPECT_TRUE(AcquireOrder(last, 1, ChunkPass::kEmbedding).empty());
  EXPECT_TRUE(AcquireOrder(last, 0, ChunkPass::kHead).empty());  // not on that stage
}

}  // namespace
}  // namespace parallax
