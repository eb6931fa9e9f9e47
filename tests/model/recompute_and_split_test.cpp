// Three Megatron-Core layout settings the published MoE recipes use: selective recompute of named
// modules (--recompute-modules core_attn / layernorm / moe_act / mla_up_proj / mlp), the explicit
// pipeline split (num_layers_in_first/last_pipeline_stage) and the pipeline layout of NVIDIA's
// DeepSeek-V3 recipes (--pipeline-model-parallel-layout "Et*4|(t*4|)*14tmL", model/pipeline_layout.h).
// Each is read in every form a layout is written, the one counting rule (model/counting.h) drops
// exactly what the module recomputes, stages split as Megatron-Core splits them, and a layout that
// cannot hold the model is rejected with the reason.
#include <gtest/gtest.h>

#include "model/counting.h"
#include "model/load.h"
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

TEST(RecomputeModules, RoundTripThroughInlineTextAndJsonAndImplySelective) {
  const Layout l = Parse("dp=8,recompute_modules=layernorm+moe_act");
  EXPECT_EQ(l.recompute, Recompute::kSelective);
  EXPECT_EQ(l.selective_modules(), kRecomputeLayernorm | kRecomputeMoeAct);
  EXPECT_NE(LayoutToString(l).find(",recompute=selective,recompute_modules=layernorm+moe_act,"), std::string::npos);
  EXPECT_EQ(Parse(LayoutToString(l)).recompute_modules, l.recompute_modules);
  const Json j = LayoutToJson(l);
  EXPECT_EQ(j["recompute_modules"], "layernorm+moe_act");
  auto back = LayoutFromJson(j, "p.json", "/layout");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->selective_modules(), l.selective_modules());
  // Megatron's own spelling (space-separated) reads too; core_attn alone is selective's default,
  // written as before the key existed.
  auto spaced = LayoutFromJson(Json{{"recompute_modules", "core_attn moe_act"}}, "p.json", "/layout");
  ASSERT_TRUE(spaced) << spaced.error().message;
  EXPECT_EQ(spaced->selective_modules(), kRecomputeCoreAttn | kRecomputeMoeAct);
  const Layout core = Parse("recompute_modules=core_attn");
  EXPECT_EQ(core.recompute, Recompute::kSelective);
  EXPECT_EQ(core.recompute_modules, 0u);
  EXPECT_FALSE(LayoutToJson(core).contains("recompute_modules"));
  EXPECT_EQ(Parse("recompute=selective").selective_modules(), kRecomputeCoreAttn);
  EXPECT_EQ(Parse("recompute=none").recomputed_modules(), 0u);
  EXPECT_EQ(Parse("recompute=full").recomputed_modules(), kRecomputeAllModules);
}

TEST(RecomputeModules, UnknownModulesAndFullRecomputeAreRejectedWithTheirPath) {
  auto bad = ParseInlineLayout("recompute_modules=layernorm+moe");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("plan: /recompute_modules: unknown recompute module \"moe\""), std::string::npos)
      << bad.error().message;
  auto full = ParseInlineLayout("recompute=full,recompute_modules=moe_act");
  ASSERT_FALSE(full);
  EXPECT_NE(full.error().message.find("recompute=full reruns every module"), std::string::npos) << full.error().message;
  auto json = LayoutFromJson(Json{{"recompute_modules", "norm"}}, "p.json", "/layout");
  ASSERT_FALSE(json);
  EXPECT_NE(json.error().message.find("p.json"), std::string::npos) << json.error().message;
  EXPECT_NE(json.error().message.find("/layout/recompute_modules"), std::string::npos) << json.error().message;
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

TEST(RecomputeModules, EachModuleDropsExactlyTheOutputItRecomputes) {
  const ModelSpec m = *ModelPreset("qwen3-30b-a3b");
  ASSERT_TRUE(m.moe());
  const int64_t s = m.seq_len, h = m.hidden, e = 2, tp = 2;
  const int64_t none = Kept(m, 0, 0);
  // layernorm: the two norms' outputs (the QKV and the router / fc1 inputs), sequence-sharded.
  EXPECT_EQ(none - Kept(m, 0, kRecomputeLayernorm), 2 * e * s * h / tp);
  // moe_act: the routed experts' activation output, k copies of each of the rank's tokens, f wide.
  EXPECT_EQ(none - Kept(m, 0, kRecomputeMoeAct), m.experts_per_token * (s / tp) * e * m.moe_ffn_hidden);
  // core_attn: the attention's fp32 statistics (flash attention keeps no probabilities).
  EXPECT_EQ(none - Kept(m, 0, kRecomputeCoreAttn), 4 * m.heads * s / tp);
  // The modules add up; a dense layer has no expert activation to drop.
  EXPECT_EQ(none - Kept(m, 0, kRecomputeAllModules), (none - Kept(m, 0, kRecomputeLayernorm)) +
                                                         (none - Kept(m, 0, kRecomputeMoeAct)) +
                                                         (none - Kept(m, 0, kRecomputeCoreAttn)));
  const ModelSpec dense = *ModelPreset("llama3-8b");
  EXPECT_EQ(Kept(dense, 0, kRecomputeMoeAct), Kept(dense, 0, 0));
}

TEST(RecomputeModules, OnlyTheAttentionCoreAddsFlopsAndEachModuleRerunsItsForward) {
  const ModelSpec m = *ModelPreset("qwen3-30b-a3b");
  const double none = TrainingFlopsPerToken(m, m.seq_len, Recompute::kNone);
  EXPECT_EQ(TrainingFlopsPerToken(m, m.seq_len, Recompute::kSelective, kRecomputeLayernorm | kRecomputeMoeAct), none);
  EXPECT_GT(TrainingFlopsPerToken(m, m.seq_len, Recompute::kSelective, kRecomputeCoreAttn), none);
  OpShapeKey k;
  k.tp = 2;
  k.sequence_parallel = true;
  k.recompute = Recompute::kSelective;
  k.selective_modules = kRecomputeLayernorm | kRecomputeMoeAct;
  std::vector<OpKind> redone;
  const OpCatalogue cat = BuildOpCatalogue(m, k, DefaultImplementation());
  for (const OpSpec& op : cat.kinds[static_cast<size_t>(LayerKindOf(m, 0))].bwd) {
    if (op.phase == Phase::kRecompute) redone.push_back(op.op);
  }
  EXPECT_EQ(redone, (std::vector<OpKind>{OpKind::kAttnNorm, OpKind::kMlpNorm, OpKind::kExpertAct}));
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

TEST(StageSplit, ExplicitFirstAndLastRanksSplitDeepSeekV3AsNemosRecipe) {
  // NeMo's DeepSeek-V3 performance recipe at pp 4: 15, 16, 16, 14 of 61 layers.
  const Layout l = Parse("pp=4,first_stage_layers=15,last_stage_layers=14");
  EXPECT_EQ(StageSplitOf(l, 61), StageSplit::kExplicit);
  EXPECT_EQ(StageSplitProblem(l, 61), "");
  const int64_t expected[] = {15, 16, 16, 14};
  int64_t next = 0;
  for (int64_t stage = 0; stage < 4; ++stage) {
    const LayerRange r = StageLayers(l, 61, stage);
    EXPECT_EQ(r.first, next) << stage;
    EXPECT_EQ(r.count, expected[stage]) << stage;
    next = r.end();
  }
  EXPECT_EQ(next, 61);
  // Written out only where set, read back in both forms.
  EXPECT_NE(LayoutToString(l).find(",first_stage_layers=15,last_stage_layers=14"), std::string::npos);
  auto back = LayoutFromJson(LayoutToJson(l), "p.json", "/layout");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->first_stage_layers, 15);
  EXPECT_EQ(back->last_stage_layers, 14);
  EXPECT_FALSE(LayoutToJson(Parse("pp=4")).contains("first_stage_layers"));
}

TEST(StageSplit, ExplicitSplitWithVirtualStagesInterleavesEachRanksChunks) {
  // 20 layers, pp 2, vp 2, first rank 8: rank 0 holds 4 + 4, rank 1 6 + 6; chunk 1 of every rank
  // follows chunk 0 of the last (Megatron-Core's get_transformer_layer_offset).
  const Layout l = Parse("pp=2,first_stage_layers=8,schedule=interleaved,virtual_stages=2");
  EXPECT_EQ(StageSplitProblem(l, 20), "");
  const auto at = [&](int64_t rank, int64_t chunk) { return StageLayers(l, 20, ModelStage(2, rank, chunk)); };
  EXPECT_EQ(at(0, 0).first, 0);
  EXPECT_EQ(at(0, 0).count, 4);
  EXPECT_EQ(at(1, 0).first, 4);
  EXPECT_EQ(at(1, 0).count, 6);
  EXPECT_EQ(at(0, 1).first, 10);
  EXPECT_EQ(at(0, 1).count, 4);
  EXPECT_EQ(at(1, 1).first, 14);
  EXPECT_EQ(at(1, 1).end(), 20);
}

TEST(StageSplit, ExplicitSplitsThatDoNotShareOutAreRejectedWithTheReason) {
  EXPECT_EQ(StageSplitProblem(Parse("pp=4,first_stage_layers=15,last_stage_layers=15"), 61),
            "first_stage_layers=15 and last_stage_layers=15 leave 31 layers, which the 2 middle pipeline ranks do "
            "not share evenly");
  EXPECT_EQ(StageSplitProblem(Parse("pp=2,first_stage_layers=40,last_stage_layers=30"), 61),
            "first_stage_layers=40 and last_stage_layers=30 leave -9 of layers=61 for 0 middle pipeline ranks");
  EXPECT_EQ(StageSplitProblem(Parse("pp=1,first_stage_layers=4"), 8),
            "first_stage_layers / last_stage_layers need pp >= 2 (they name a pipeline rank's layers)");
  EXPECT_EQ(StageSplitProblem(Parse("pp=2,first_stage_layers=3,schedule=interleaved,virtual_stages=2"), 8),
            "pipeline rank 0's 3 layers (first_stage_layers=3 and last_stage_layers=0) do not split over "
            "virtual_stages=2 chunks evenly");
  // ValidateLayout reports it as a plan error.
  const ModelSpec m = *ModelPreset("deepseek-v3");
  auto l = Parse("dp=1,tp=8,pp=4,ep=8,global_batch=8,first_stage_layers=15,last_stage_layers=15");
  Status st = ValidateLayout(l, m, *ClusterPreset("dgx-h100"), 32);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message.rfind("plan: first_stage_layers=15", 0), 0u) << st.error().message;
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

}  // namespace
}  // namespace parallax
