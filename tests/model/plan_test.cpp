// Layout validation: each broken rule is named.
#include <gtest/gtest.h>

#include "model/load.h"
#include "model/presets.h"

namespace parallax {
namespace {

std::string Check(const char* inline_layout, const char* model = "llama3-8b", int64_t nodes = 2) {
  auto l = ParseInlineLayout(inline_layout);
  EXPECT_TRUE(l) << inline_layout;
  auto c = ResolveCluster("dgx-a100", nodes);
  Status s = ValidateLayout(*l, *ModelPreset(model), *c);
  return s ? "ok" : s.error().message;
}

TEST(Layout, AcceptsValidLayouts) {
  EXPECT_EQ(Check("dp=2,tp=8,pp=1,global_batch=64"), "ok");
  EXPECT_EQ(Check("dp=1,tp=4,pp=4,global_batch=64,schedule=interleaved,virtual_stages=2"), "ok");
  EXPECT_EQ(Check("dp=16,tp=1,pp=1,zero=3,micro_batch=4,global_batch=64,recompute=full"), "ok");
  EXPECT_EQ(Check("dp=4,tp=2,pp=2,global_batch=64,sp=1"), "ok");
  // Uneven pipeline split without interleaving: 126 layers over pp=4, the embedding and the loss
  // counted as one layer each (Megatron-Core's split), on an 8-GPU world.
  auto l = *ParseInlineLayout("dp=2,tp=1,pp=4,global_batch=16");
  EXPECT_TRUE(ValidateLayout(l, *ModelPreset("llama3-405b"), *ClusterPreset("dgx-a100"), 8));
  // 32 layers over pp=3 split neither way (Megatron-Core asserts), so the layout is refused.
  l = *ParseInlineLayout("dp=2,tp=1,pp=3,global_batch=12");
  const Status st = ValidateLayout(l, *ModelPreset("llama3-8b"), *ClusterPreset("dgx-a100"), 6);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message,
            "plan: pp=3 divides neither layers=32 nor 34 (the layers with the embedding and the loss counted as one "
            "each, Megatron-Core's account_for_embedding/loss_in_pipeline_split)");
}

TEST(Layout, NamesTheBrokenRule) {
  EXPECT_EQ(Check("dp=3,tp=2,pp=1,global_batch=6"),
            "plan: dp*tp*pp = 3*2*1 = 6 does not equal the cluster's GPU count 16");
  EXPECT_EQ(Check("dp=16,tp=1,pp=1,global_batch=64", "gpt-tiny", 2), "ok");
  // tp=16 on 8-GPU nodes spans two whole nodes: allowed (its collectives cross nodes); tp=12 is not.
  EXPECT_EQ(Check("dp=1,tp=16,pp=1,global_batch=64", "gpt3-175b"), "ok");
  EXPECT_EQ(Check("dp=2,tp=12,pp=1,global_batch=64", "gpt3-175b", 3),
            "plan: tp=12 exceeds gpus_per_node=8 and is not a multiple of it (a tensor-parallel group spans whole nodes)");
  EXPECT_EQ(Check("dp=2,tp=8,pp=1,global_batch=64", "gpt-tiny"), "plan: tp=8 does not divide heads=4");
  EXPECT_EQ(Check("dp=1,tp=16,pp=1,global_batch=64"), "plan: tp=16 does not divide kv_heads=8");
  EXPECT_EQ(Check("dp=2,tp=1,pp=8,global_batch=64", "gpt-tiny"), "plan: pp=8 exceeds layers=4");
  EXPECT_EQ(Check("dp=1,tp=4,pp=4,global_batch=64,schedule=interleaved,virtual_stages=3"),
            "plan: virtual_stages=3 does not divide the layers per stage (32 layers over pp=4), nor does "
            "pp*virtual_stages=12 divide 34 (the layers with the embedding and the loss counted as one each, "
            "Megatron-Core's account_for_embedding/loss_in_pipeline_split)");
  EXPECT_EQ(Check("dp=2,tp=8,pp=1,micro_batch=3,global_batch=64"),
            "plan: global_batch=64 is not divisible by dp*micro_batch=6");
  EXPECT_EQ(Check("dp=2,tp=8,pp=1"), "plan: global_batch must be > 0 (give it in the plan or with --global-batch)");
  EXPECT_EQ(Check("dp=1,tp=4,pp=4,global_batch=6,schedule=interleaved,virtual_stages=2"),
            "plan: schedule=interleaved needs the micro-batch count (6) to be a multiple of pp=4");
  EXPECT_EQ(Check("dp=16,tp=1,pp=1,zero=5,global_batch=64"), "plan: zero_stage must be 0, 1, 2 or 3 (got 5)");
}

TEST(Layout, WorldSizeOverridesClusterCount) {
  auto l = *ParseInlineLayout("dp=2,tp=2,global_batch=8");
  const auto m = *ModelPreset("gpt-tiny");
  const auto c = *ClusterPreset("local-cpu");
  EXPECT_TRUE(ValidateLayout(l, m, c, 4));
  Status s = ValidateLayout(l, m, c, 2);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "plan: dp*tp*pp = 2*2*1 = 4 does not equal the world size 2");
}

TEST(Layout, ResolvePlanInlineTakesCommandLineBatch) {
  const auto m = *ModelPreset("gpt-tiny");
  const auto c = *ClusterPreset("local-cpu");
  TrainingSpec t;
  t.global_batch = 16;
  auto p = ResolvePlan("dp=2,tp=2", &m, &c, t);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->layout.global_batch, 16);
  EXPECT_EQ(p->training.global_batch, 16);
  auto missing = ResolvePlan("dp=2,tp=2", nullptr, &c, t);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "an inline plan needs --model");
}

}  // namespace
}  // namespace parallax
