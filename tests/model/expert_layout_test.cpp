// Expert parallelism in the layout (ep, etp, routing), the expert groups carved from a stage's
// tp x dp ranks, the expert parameter groups and the rejections that explain themselves.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/load.h"
#include "model/param_groups.h"
#include "model/presets.h"

namespace parallax {
namespace {

std::string Check(const char* inline_layout, const char* model, int64_t nodes) {
  auto l = ParseInlineLayout(inline_layout);
  EXPECT_TRUE(l) << inline_layout;
  auto c = ResolveCluster("dgx-h100", nodes);
  Status s = ValidateLayout(*l, *ModelPreset(model), *c);
  return s ? "ok" : s.error().message;
}

TEST(ExpertLayout, EpDoesNotMultiplyTheWorldSize) {
  // 64 GPUs: dp 8 x tp 8; ep 8 x etp 1 carved from the 64 ranks of the one stage, edp 8.
  EXPECT_EQ(Check("dp=8,tp=8,ep=8,etp=1,sp=1,global_batch=64", "mixtral-8x7b", 8), "ok");
  auto l = *ParseInlineLayout("dp=8,tp=8,ep=8,etp=1,sp=1,global_batch=64");
  EXPECT_EQ(l.world_size(), 64);
  EXPECT_EQ(l.expert_dp(), 8);
  // etp defaults to tp (Megatron-Core).
  auto d = *ParseInlineLayout("dp=4,tp=2,ep=4");
  EXPECT_EQ(d.expert_tp(), 2);
  EXPECT_EQ(d.expert_dp(), 1);
}

TEST(ExpertLayout, RejectionsNameTheRule) {
  EXPECT_EQ(Check("dp=16,tp=1,ep=3,global_batch=64", "mixtral-8x7b", 2), "plan: ep=3 does not divide experts=8");
  EXPECT_EQ(Check("dp=2,tp=8,ep=8,sp=1,global_batch=64", "mixtral-8x7b", 2),
            "plan: ep*etp = 8*8 does not divide a pipeline stage's tp*cp*dp = 16 ranks (expert groups are carved "
            "from tp x cp x dp within a stage, as Megatron-Core's parallel folding)");
  // cp ranks hold experts too (Megatron-Core's folding): ep 8 over tp 1 x cp 4 x dp 2.
  EXPECT_EQ(Check("dp=2,cp=4,ep=8,etp=1,global_batch=64", "mixtral-8x7b", 1), "ok");
  EXPECT_EQ(Check("dp=16,tp=1,ep=2,global_batch=64", "llama3-8b", 2),
            "plan: ep=2 needs a mixture-of-experts model (llama3-8b has no experts)");
  EXPECT_EQ(Check("dp=2,tp=8,ep=2,etp=1,global_batch=64", "mixtral-8x7b", 2),
            "plan: an MoE model with tp=8 needs sequence_parallel (Megatron-Core requires it: the dispatcher routes "
            "each rank's sequence shard)");
  EXPECT_EQ(Check("dp=4,tp=4,ep=2,etp=3,sp=1,global_batch=64", "mixtral-8x7b", 2),
            "plan: etp=3 does not divide moe_ffn_hidden=14336");
}

TEST(ExpertLayout, InlineJsonAndStringRoundTripAndDenseLayoutsAreUnchanged) {
  auto l = *ParseInlineLayout("dp=8,tp=2,ep=4,etp=1,routing=dropless:1.5,global_batch=64");
  EXPECT_EQ(l.routing.kind, RoutingKind::kDropless);
  EXPECT_DOUBLE_EQ(l.routing.LoadFactor(), 1.5);
  auto back = ParseInlineLayout(LayoutToString(l));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ep, 4);
  EXPECT_EQ(back->etp, 1);
  EXPECT_EQ(back->routing, l.routing);
  auto json = LayoutFromJson(LayoutToJson(l), "p.json", "/layout");
  ASSERT_TRUE(json) << json.error().message;
  EXPECT_EQ(json->routing, l.routing);
  EXPECT_EQ(json->ep, 4);
  const Layout dense;
  EXPECT_EQ(LayoutToString(dense).find("ep="), std::string::npos);
  EXPECT_FALSE(LayoutToJson(dense).contains("ep"));
  for (const char* bad : {"routing=dropless:0.5", "routing=capacity:0", "routing=lopsided", "routing=capacity:x"}) {
    auto r = ParseInlineLayout(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("plan: /routing: expected balanced, dropless:F"), std::string::npos)
        << r.error().message;
  }
  auto j = Json::parse(R"({"dp":2,"ep":0})");
  auto r = LayoutFromJson(j, "p.json", "/layout");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("p.json: /layout/ep:"), std::string::npos) << r.error().message;
}

TEST(ExpertLayout, ExpertGroupsFoldTheStageRanksEtpFastest) {
  // tp 2 x dp 4 on one stage = 8 ranks; etp 1, ep 4 -> edp 2. Expert coordinates cover every
  // (ep, edp) pair once, and the inverse gives the global rank back.
  Layout l;
  l.tp = 2;
  l.dp = 4;
  l.pp = 2;
  l.ep = 4;
  l.etp = 1;
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int64_t pp = 0; pp < l.pp; ++pp) {
    for (int64_t d = 0; d < l.dp; ++d) {
      for (int64_t t = 0; t < l.tp; ++t) {
        const ExpertCoords e = ExpertCoordsOf(l, t, 0, d);
        EXPECT_EQ(ExpertGlobalRank(l, e, pp), GlobalRank(l, t, 0, d, pp));
        if (pp == 0) seen.insert({e.ep_idx, e.edp_idx});
      }
    }
  }
  EXPECT_EQ(seen.size(), 8u);
  // Ranks 0..3 of the stage form ep group 0 (consecutive: inside one node).
  EXPECT_EQ(ExpertCoordsOf(l, 1, 0, 1).ep_idx, 3);
  EXPECT_EQ(ExpertCoordsOf(l, 0, 0, 2).edp_idx, 1);
}

TEST(ExpertParamGroups, ExpertsAreAGroupOfTheirOwnReducedOverExpertDp) {
  const ModelSpec m = *ModelPreset("deepseek-v3");
  Layout l;
  l.tp = 2;
  l.dp = 32;
  l.pp = 8;
  l.ep = 64;
  l.etp = 1;
  l.sequence_parallel = true;
  const auto groups = RankParamGroups(m, l, DefaultImplementation(), Precision::kBf16, 0);
  // 61 layers over pp 8: stage 0 holds layers 0..6, three dense and four MoE: seven layer groups and
  // four expert groups, each right after its layer's.
  int64_t layers = 0, experts = 0;
  for (const ParamGroupDef& g : groups) {
    if (g.kind == ParamGroupKind::kLayer) ++layers;
    if (g.kind != ParamGroupKind::kExperts) {
      EXPECT_EQ(g.reduced_over, ReductionGroup::kDpCp) << g.name;
      continue;
    }
    EXPECT_EQ(g.name, "layer" + std::to_string(3 + experts) + "_experts");
    ++experts;
    EXPECT_EQ(g.reduced_over, ReductionGroup::kExpertDp);
    // 256 / 64 = 4 experts of 3 x 7168 x 2048 each, whole (etp 1).
    EXPECT_EQ(g.params, int64_t{4} * 3 * 7168 * 2048);
  }
  EXPECT_EQ(layers, 7);
  EXPECT_EQ(experts, 4);
  EXPECT_EQ(ReductionGroupSize(l, ReductionGroup::kExpertDp), 1);
  EXPECT_EQ(ReductionGroupSize(l, ReductionGroup::kDpCp), 32);
  // A dense layer's group is bigger than an MoE layer's dense part (attention, router, shared expert).
  EXPECT_GT(LayerParamsPerTpRank(m, 2, 0), LayerParamsPerTpRank(m, 2, 3));
}

}  // namespace
}  // namespace parallax
