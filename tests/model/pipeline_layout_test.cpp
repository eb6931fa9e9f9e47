// Two Megatron-Core settings of NVIDIA's DeepSeek-V3 recipes (Megatron-Bridge
// scripts/performance/configs/deepseek/deepseek_workload_base_configs.py): the explicit pipeline
// layout (--pipeline-model-parallel-layout "Et*4|(t*4|)*14tmL", model/pipeline_layout.h) and the
// recompute modules mla_up_proj and mlp. Each reads in every form a layout is written, splits or
// drops what Megatron-Core does, and a layout that cannot hold the model is rejected with the reason.
#include <gtest/gtest.h>

#include "model/counting.h"
#include "model/op_catalogue.h"
#include "model/pipeline_layout.h"
#include "model/presets.h"
#include "model/stage_split.h"

namespace parallax {
namespace {

Layout Parse(const std::string& text) {
  auto l = ParseInlineLayout(text);
  EXPECT_TRUE(l) << text << ": " << (l ? "" : l.error().message);
  return l ? *l : Layout{};
}

TEST(PipelineLayout, UnrollsRepetitionsAndGroupsAsMegatronParsesThem) {
  auto stages = ParsePipelineLayout("Et*4|(t*4|)*14tmL");
  ASSERT_TRUE(stages) << stages.error().message;
  ASSERT_EQ(stages->size(), 16u);
  EXPECT_TRUE(stages->front().embedding);
  EXPECT_EQ(stages->front().decoders, 4);
  for (size_t i = 1; i < 15; ++i) EXPECT_EQ((*stages)[i].decoders, 4) << i;
  EXPECT_EQ(stages->back().decoders, 1);
  EXPECT_EQ(stages->back().mtp, 1);
  EXPECT_TRUE(stages->back().loss);
  // Megatron's own example (parse_str_to_list): cosmetic commas, a group of two stages.
  auto example = ParsePipelineLayout("Ettt|(tt|)*29,m|L");
  ASSERT_TRUE(example) << example.error().message;
  EXPECT_EQ(example->size(), 32u);
  EXPECT_EQ((*example)[30].mtp, 1);
  EXPECT_TRUE((*example)[31].loss);
  EXPECT_EQ((*example)[31].decoders, 0);
  auto bad = ParsePipelineLayout("Et*4|x|L");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("unknown character 'x'"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(ParsePipelineLayout("E(tt|L"));
  EXPECT_FALSE(ParsePipelineLayout("Et*0|L"));
}

TEST(PipelineLayout, SplitsDeepSeekV3OverInterleavedStagesInVirtualOrder) {
  // 61 layers, pp 4, vp 4: stage i runs on rank i % 4 as its chunk i / 4.
  const Layout l = Parse("pp=4,schedule=interleaved,virtual_stages=4,pipeline_layout=Et*4|(t*4|)*14tmL");
  EXPECT_EQ(StageSplitOf(l, 61), StageSplit::kLayout);
  EXPECT_EQ(StageSplitProblem(l, 61), "");
  int64_t next = 0;
  for (int64_t stage = 0; stage < 16; ++stage) {
    const LayerRange r = StageLayers(l, 61, stage);
    EXPECT_EQ(r.first, next) << stage;
    EXPECT_EQ(r.count, stage == 15 ? 1 : 4) << stage;
    next = r.end();
  }
  EXPECT_EQ(next, 61);
  // Rank 3 holds chunks 3, 7, 11 and 15: 4 + 4 + 4 + 1 layers.
  int64_t rank3 = 0;
  for (int64_t chunk = 0; chunk < 4; ++chunk) rank3 += StageLayers(l, 61, ModelStage(4, 3, chunk)).count;
  EXPECT_EQ(rank3, 13);
  // Written out only where set, read back in both forms.
  EXPECT_NE(LayoutToString(l).find(",pipeline_layout=Et*4|(t*4|)*14tmL"), std::string::npos);
  EXPECT_EQ(Parse(LayoutToString(l)).pipeline_layout, l.pipeline_layout);
  auto back = LayoutFromJson(LayoutToJson(l), "p.json", "/layout");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->pipeline_layout, l.pipeline_layout);
  EXPECT_FALSE(LayoutToJson(Parse("pp=4")).contains("pipeline_layout"));
}

TEST(PipelineLayout, LayoutsThatCannotHoldTheModelAreRejectedWithTheReason) {
  EXPECT_EQ(PipelineLayoutProblem("Et*4|(t*4|)*14tmL", 61, 1, 4, 2),
            "pipeline_layout \"Et*4|(t*4|)*14tmL\" names 16 stages, pp*virtual_stages=8");
  EXPECT_EQ(PipelineLayoutProblem("Et*4|(t*4|)*14tmL", 60, 1, 4, 4),
            "pipeline_layout \"Et*4|(t*4|)*14tmL\" places 61 decoder layers (t), the model has layers=60");
  EXPECT_EQ(PipelineLayoutProblem("t*4|Et*4|(t*4|)*13tL", 61, 0, 4, 4),
            "pipeline_layout \"t*4|Et*4|(t*4|)*13tL\": the embedding (E) must open the first stage, once");
  EXPECT_EQ(PipelineLayoutProblem("Et*4|(t*4|)*14tm", 61, 1, 4, 4),
            "pipeline_layout \"Et*4|(t*4|)*14tm\": the loss (L) must close the last stage, once");
  EXPECT_EQ(PipelineLayoutProblem("Et*4|(t*4|)*13tm|t*4L", 61, 1, 4, 4),
            "pipeline_layout \"Et*4|(t*4|)*13tm|t*4L\": a decoder layer after the MTP module (stage 15)");
  // ValidateLayout checks the MTP modules against the model's (DeepSeek-V3 has one) and refuses a
  // layout beside an explicit first/last split.
  const ModelSpec m = *ModelPreset("deepseek-v3");
  const ClusterSpec c = *ClusterPreset("dgx-h100");
  const std::string base = "dp=2,tp=1,pp=4,ep=2,global_batch=64,schedule=interleaved,virtual_stages=4,";
  EXPECT_TRUE(ValidateLayout(Parse(base + "pipeline_layout=Et*4|(t*4|)*14tmL"), m, c, 8));
  Status no_mtp = ValidateLayout(Parse(base + "pipeline_layout=Et*4|(t*4|)*14tL"), m, c, 8);
  ASSERT_FALSE(no_mtp);
  EXPECT_NE(no_mtp.error().message.find("places 0 MTP modules (m), the model has mtp_layers=1"), std::string::npos)
      << no_mtp.error().message;
  Status both = ValidateLayout(Parse(base + "first_stage_layers=16,pipeline_layout=Et*4|(t*4|)*14tmL"), m, c, 8);
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().message.find("drop first_stage_layers"), std::string::npos) << both.error().message;
}

//! Activations of layer `layer` of `m` with `modules` recomputed selectively (tp 2 with SP, bf16).
int64_t Kept(const ModelSpec& m, int64_t layer, uint32_t modules) {
  ActivationOptions o;
  o.tp = 2;
  o.sequence_parallel = true;
  o.attention_keeps_statistics = true;
  o.recompute = modules == 0 ? Recompute::kNone : Recompute::kSelective;
  o.selective_modules = modules == 0 ? kRecomputeCoreAttn : modules;
  return ActivationBytesOfLayer(m, layer, o);
}

TEST(RecomputeModules, MlaUpProjDropsQueriesKeysValuesAndMlpOnlyDenseLayersMlp) {
  const ModelSpec m = *ModelPreset("deepseek-v3");
  const int64_t s = m.seq_len, e = 2, tp = 2;
  // mla_up_proj: the up-projected queries and keys (heads x 192 each) and values (heads x 128).
  const int64_t qkv = 2 * m.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) + m.heads * m.v_head_dim;
  EXPECT_EQ(Kept(m, 5, 0) - Kept(m, 5, kRecomputeMlaUpProj), e * s * qkv / tp);
  // mlp: a dense layer's (layer 0 of 3) SwiGLU MLP keeps nothing of its own; an MoE layer is left alone.
  EXPECT_EQ(Kept(m, 0, 0) - Kept(m, 0, kRecomputeMlp), 3 * e * s * m.ffn_hidden / tp);
  EXPECT_EQ(Kept(m, 5, kRecomputeMlp), Kept(m, 5, 0));
  // Both rerun GEMMs: their FLOPs count, and the backward reruns them as recompute ops.
  const double none = TrainingFlopsPerToken(m, m.seq_len, Recompute::kNone);
  EXPECT_GT(TrainingFlopsPerToken(m, m.seq_len, Recompute::kSelective, kRecomputeMlaUpProj | kRecomputeMlp), none);
  EXPECT_EQ(SelectiveModuleFlopsPerToken(m, true, kRecomputeMlp), 0.0);
  EXPECT_GT(SelectiveModuleFlopsPerToken(m, false, kRecomputeMlp), 0.0);
  EXPECT_EQ(SelectiveModuleFlopsPerToken(*ModelPreset("qwen3-30b-a3b"), true, kRecomputeMlaUpProj), 0.0);
  OpShapeKey k;  // tp 1: no TP collectives among the recomputed ops
  k.recompute = Recompute::kSelective;
  k.selective_modules = kRecomputeMlaUpProj | kRecomputeMlp;
  const OpCatalogue cat = BuildOpCatalogue(m, k, DefaultImplementation());
  auto redone = [&](int64_t layer) {
    std::vector<OpKind> ops;
    for (const OpSpec& op : cat.kinds[static_cast<size_t>(LayerKindOf(m, layer))].bwd) {
      if (op.phase == Phase::kRecompute) ops.push_back(op.op);
    }
    return ops;
  };
  EXPECT_EQ(redone(5), (std::vector<OpKind>{OpKind::kQkv}));
  EXPECT_EQ(redone(0), (std::vector<OpKind>{OpKind::kQkv, OpKind::kFc1, OpKind::kAct, OpKind::kFc2}));
  // Megatron's names read and write back.
  EXPECT_EQ(Parse("recompute_modules=mla_up_proj+mlp").selective_modules(), kRecomputeMlaUpProj | kRecomputeMlp);
  EXPECT_EQ(RecomputeModulesToString(kRecomputeMlaUpProj | kRecomputeMlp), "mla_up_proj+mlp");
}

}  // namespace
}  // namespace parallax
