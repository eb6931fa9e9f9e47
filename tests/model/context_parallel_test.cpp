// Context parallelism in the layout: the cp key in every form a layout is written, its world size,
// its validation rules, and Megatron-Core's uneven pipeline split that long-context recipes use.
#include <gtest/gtest.h>

#include "model/load.h"
#include "model/presets.h"
#include "model/stage_split.h"

namespace parallax {
namespace {

std::string Check(const std::string& inline_layout, const ModelSpec& m, int64_t world) {
  auto l = ParseInlineLayout(inline_layout);
  EXPECT_TRUE(l) << inline_layout;
  Status s = ValidateLayout(*l, m, *ClusterPreset("dgx-h100"), world);
  return s ? "ok" : s.error().message;
}

TEST(ContextParallelLayout, CpRoundTripsThroughInlineTextAndJson) {
  auto l = ParseInlineLayout("dp=2,tp=4,pp=2,cp=4,global_batch=64");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->cp, 4);
  EXPECT_EQ(l->world_size(), 2 * 4 * 4 * 2);
  EXPECT_EQ(LayoutToString(*l).find("cp=4") != std::string::npos, true) << LayoutToString(*l);
  auto again = ParseInlineLayout(LayoutToString(*l));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cp, 4);
  auto from_json = LayoutFromJson(LayoutToJson(*l), "plan.json", "/layout");
  ASSERT_TRUE(from_json) << from_json.error().message;
  EXPECT_EQ(from_json->cp, 4);
  EXPECT_EQ(LayoutToJson(*from_json), LayoutToJson(*l));
}

TEST(ContextParallelLayout, CpOfOneIsWrittenAsBeforeContextParallelismExisted) {
  auto l = ParseInlineLayout("dp=2,tp=4,global_batch=64");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->cp, 1);
  EXPECT_FALSE(LayoutToJson(*l).contains("cp"));
  EXPECT_EQ(LayoutToString(*l),
            "dp=2,tp=4,pp=1,zero=0,micro_batch=1,global_batch=64,recompute=none,schedule=1f1b,virtual_stages=1,"
            "sequence_parallel=0");
}

TEST(ContextParallelLayout, BadCpValuesAreRejectedWithTheirPath) {
  auto zero = ParseInlineLayout("cp=x");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().message, "plan: /cp: expected an integer, got \"x\"");
  auto j = LayoutToJson(*ParseInlineLayout("dp=1"));
  j["cp"] = 0;
  auto bad = LayoutFromJson(j, "plan.json", "/layout");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/layout/cp"), std::string::npos) << bad.error().message;
}

TEST(ContextParallelLayout, WorldSizeCountsCp) {
  const ModelSpec m = *ModelPreset("llama3-8b");
  EXPECT_EQ(Check("dp=2,tp=4,cp=2,global_batch=64", m, 16), "ok");
  EXPECT_EQ(Check("dp=2,tp=4,cp=2,global_batch=64", m, 8),
            "plan: dp*tp*cp*pp = 2*4*2*1 = 16 does not equal the world size 8");
}

TEST(ContextParallelLayout, SequenceMustSplitIntoTwoChunksPerCpRank) {
  ModelSpec m = *ModelPreset("llama3-8b");
  m.seq_len = 8192 + 4;  // divisible by 4, not by 8
  EXPECT_EQ(Check("dp=4,tp=2,cp=2,global_batch=64", m, 16), "ok");
  EXPECT_EQ(Check("dp=2,tp=2,cp=4,global_batch=64", m, 16),
            "plan: cp=4 needs seq_len=8196 to be divisible by 2*cp=8 (causal load balance: each cp rank holds "
            "sequence chunks i and 2*cp-1-i)");
  // Sequence parallelism splits each cp rank's tokens over tp.
  m.seq_len = 40;  // 2*cp = 8 divides it, tp*cp = 16 does not
  EXPECT_EQ(Check("dp=1,tp=4,cp=4,global_batch=64,sp=1", m, 16),
            "plan: sequence_parallel needs tp*cp = 4*4 = 16 to divide seq_len=40");
}

TEST(ContextParallelLayout, OnlyAllToAllCpSplitsHeadsOverTpTimesCp) {
  ModelSpec m = *ModelPreset("llama3-8b");  // 32 heads, 8 kv heads
  const Layout l = *ParseInlineLayout("dp=1,tp=8,cp=8,global_batch=64");
  ImplementationProfile impl = *ImplementationPreset("megatron-core");
  EXPECT_EQ(CpCommTypeProblem(l, m, impl), "");  // p2p: heads over tp only
  impl.cp_comm_type.value = CpCommType::kAllGather;
  EXPECT_EQ(CpCommTypeProblem(l, m, impl), "");
  impl.cp_comm_type.value = CpCommType::kA2a;
  EXPECT_EQ(CpCommTypeProblem(l, m, impl),
            "cp=8 with cp_comm_type a2a needs tp*cp = 64 to divide heads=32 (the all-to-all splits the heads over "
            "tp*cp ranks)");
  // kv heads fewer than tp*cp are replicated: no kv-head rule.
  EXPECT_EQ(CpCommTypeProblem(*ParseInlineLayout("tp=4,cp=8"), m, impl), "");
  EXPECT_EQ(CpCommTypeProblem(*ParseInlineLayout("tp=4,cp=1"), m, *ImplementationPreset("deepspeed")), "");
  EXPECT_EQ(CpCommTypeProblem(l, m, *ImplementationPreset("deepspeed")),
            "cp=8: deepspeed has no context parallelism (its cp_comm_type fact is none)");
}

TEST(ContextParallelLayout, ImplementationFactRoundTripsWithMegatronsValues) {
  ImplementationProfile impl = *ImplementationPreset("megatron-core");
  EXPECT_EQ(std::string(ToString(impl.cp_comm_type.value)), "p2p");
  for (CpCommType t : {CpCommType::kNone, CpCommType::kP2p, CpCommType::kAllGather, CpCommType::kA2a,
                       CpCommType::kA2aP2p}) {
    impl.cp_comm_type.value = t;
    auto back = ImplementationFromJson(ImplementationToJson(impl), "impl.json");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->cp_comm_type.value, t);
  }
  EXPECT_EQ(std::string(ToString(CpCommType::kAllGather)), "all_gather");
  EXPECT_EQ(std::string(ToString(CpCommType::kA2aP2p)), "a2a+p2p");
}

// Megatron-Core's account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split.
TEST(StageSplit, UnevenLayersCountTheEmbeddingAndTheLossAsOneLayerEach) {
  // Llama 3.1 405B at pp 8, vp 8: 126 layers over 64 model stages, two slots each.
  EXPECT_EQ(StageSplitOf(126, 64), StageSplit::kEmbeddingAndLossAsLayers);
  EXPECT_EQ(StageLayers(126, 64, 0).count, 1);
  EXPECT_EQ(StageLayers(126, 64, 1).first, 1);
  EXPECT_EQ(StageLayers(126, 64, 1).count, 2);
  EXPECT_EQ(StageLayers(126, 64, 63).count, 1);
  EXPECT_EQ(StageLayers(126, 64, 63).end(), 126);
  // Qwen3 235B: 94 layers at pp 8, vp 4: 32 stages of 3 slots.
  EXPECT_EQ(StageLayers(94, 32, 0).count, 2);
  EXPECT_EQ(StageLayers(94, 32, 5).count, 3);
  EXPECT_EQ(StageLayers(94, 32, 31).count, 2);
  // The 30-layer proxy at pp 4, vp 8: one slot per stage, the first and the last hold no layer.
  EXPECT_EQ(StageLayers(30, 32, 0).count, 0);
  EXPECT_EQ(StageLayers(30, 32, 1).first, 0);
  EXPECT_EQ(StageLayers(30, 32, 31).count, 0);
  for (auto [layers, stages] :
       {std::pair<int64_t, int64_t>{126, 64}, {94, 32}, {30, 8}, {30, 32}, {62, 32}, {32, 4}, {126, 4}}) {
    int64_t next = 0;
    for (int64_t s = 0; s < stages; ++s) {
      const LayerRange r = StageLayers(layers, stages, s);
      EXPECT_EQ(r.first, next) << layers << " over " << stages;
      EXPECT_GE(r.count, s == 0 || s == stages - 1 ? 0 : 1);
      next = r.end();
    }
    EXPECT_EQ(next, layers) << layers << " over " << stages;
  }
  EXPECT_EQ(StageSplitOf(32, 4), StageSplit::kEven);
  EXPECT_EQ(StageSplitOf(31, 4), StageSplit::kNone);
  // Without virtual stages the same rule (get_num_layers_to_build, vp None): 126 layers at pp 4.
  EXPECT_EQ(StageSplitOf(126, 4), StageSplit::kEmbeddingAndLossAsLayers);
  EXPECT_EQ(StageLayers(126, 4, 0).count, 31);
  EXPECT_EQ(StageLayers(126, 4, 1).count, 32);
  EXPECT_EQ(StageLayers(126, 4, 3).count, 31);
}

TEST(StageSplit, NonInterleavedLayersThatSplitNeitherWayAreRejectedWithTheReason) {
  const ModelSpec m = *ModelPreset("llama3-405b");  // 126 layers
  // 128 = 4 x 32: the embedding-and-loss split, under 1F1B and GPipe alike.
  EXPECT_EQ(Check("dp=1,tp=8,pp=4,global_batch=8", m, 32), "ok");
  EXPECT_EQ(Check("dp=1,tp=8,pp=4,global_batch=8,schedule=gpipe", m, 32), "ok");
  const std::string why =
      "plan: pp=5 divides neither layers=126 nor 128 (the layers with the embedding and the loss counted as one "
      "each, Megatron-Core's account_for_embedding/loss_in_pipeline_split)";
  EXPECT_EQ(Check("dp=1,tp=8,pp=5,global_batch=10", m, 40), why);
  EXPECT_EQ(Check("dp=1,tp=8,pp=5,global_batch=10,schedule=gpipe", m, 40), why);
}

TEST(StageSplit, InterleavedLayersThatSplitNeitherWayAreRejectedWithTheReason) {
  ModelSpec m = *ModelPreset("llama3-405b");
  EXPECT_EQ(m.layers, 126);
  EXPECT_EQ(Check("dp=2,tp=8,pp=8,global_batch=64,schedule=interleaved,virtual_stages=8", m, 128), "ok");
  m.layers = 100;  // 100 % 64 and 102 % 64 both non-zero
  EXPECT_EQ(Check("dp=2,tp=8,pp=8,global_batch=64,schedule=interleaved,virtual_stages=8", m, 128),
            "plan: virtual_stages=8 does not divide the layers per stage (100 layers over pp=8), nor does "
            "pp*virtual_stages=64 divide 102 (the layers with the embedding and the loss counted as one each, "
            "Megatron-Core's account_for_embedding/loss_in_pipeline_split)");
  // Without interleaving the same rule: 100 % 8 and 102 % 8 are non-zero too.
  EXPECT_EQ(Check("dp=2,tp=8,pp=8,global_batch=64", m, 128),
            "plan: pp=8 divides neither layers=100 nor 102 (the layers with the embedding and the loss counted as "
            "one each, Megatron-Core's account_for_embedding/loss_in_pipeline_split)");
}

}  // namespace
}  // namespace parallax
