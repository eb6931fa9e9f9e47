// Mixture-of-experts pricing (issue 37 items 3 and 4): the MoE layer's ops from the op catalogue as
// the cost model prices them (all-to-all over the placed ep group, grouped GEMMs at their per-expert
// token counts, routing balance, the dispatcher and shared-expert overlap of the profile), MLA, the
// expert parameter state over the expert data-parallel group, and the search over ep and etp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/counting.h"
#include "model/op_catalogue.h"
#include "model/presets.h"
#include "planner/cost/moe_costs.h"
#include "planner/cost/plan_costs.h"
#include "planner/export/megatron.h"
#include "planner/estimate/step_estimate.h"
#include "planner/memory/memory_model.h"
#include "planner/search/search.h"
#include "planner/sim/simulator.h"

namespace parallax::planner {
namespace {

Plan MakePlan(const std::string& model, const std::string& layout, int64_t nodes,
              const std::string& implementation = "megatron-core") {
  Plan p;
  p.model = *ModelPreset(model);
  p.cluster = *ClusterPreset("dgx-h100");
  p.cluster.nodes = nodes;
  p.layout = *ParseInlineLayout(layout);
  p.training.global_batch = p.layout.global_batch;
  p.implementation = *ImplementationPreset(implementation);
  return p;
}

//! The first op `op` in phase `ph` of an MoE layer's priced ops under `p`.
CostedOp MoeOp(const Plan& p, OpKind op, Phase ph = Phase::kFwd) {
  CostContext ctx(p.cluster, p.training.precision, nullptr, &p.implementation);
  const UnitCosts& u = ctx.Units(p.model, p.layout, p.model.seq_len);
  int64_t layer = 0;
  while (!IsMoeLayer(p.model, layer)) ++layer;
  for (const CostedOp& o : ph == Phase::kFwd ? u.Layer(layer).fwd : u.Layer(layer).bwd) {
    if (o.op == op && o.phase == ph) return o;
  }
  ADD_FAILURE() << "no " << ToString(op) << " in " << LayoutToString(p.layout);
  return {};
}

TEST(MoeCosts, DispatchAllToAllSlowsWhenTheEpGroupLeavesTheNode) {
  // DeepSeek-V3 on 16 nodes, ep 8 inside a node (NVLink) against ep 64 over 8 nodes (InfiniBand):
  // the same bytes leave each rank, the inter-node group moves them at a NIC's share.
  const Plan intra = MakePlan("deepseek-v3", "dp=128,tp=1,pp=1,ep=8,global_batch=128", 16);
  const Plan inter = MakePlan("deepseek-v3", "dp=128,tp=1,pp=1,ep=64,global_batch=128", 16);
  const CostedOp a = MoeOp(intra, OpKind::kMoeDispatch), b = MoeOp(inter, OpKind::kMoeDispatch);
  EXPECT_DOUBLE_EQ(a.bytes, b.bytes);
  EXPECT_GT(b.time_s, 3 * a.time_s);
  // Combine and the backward's two all-to-alls move the same bytes.
  EXPECT_DOUBLE_EQ(MoeOp(intra, OpKind::kMoeCombine).bytes, a.bytes);
  EXPECT_DOUBLE_EQ(MoeOp(intra, OpKind::kMoeDispatch, Phase::kBwd).bytes, a.bytes);
  // k copies of each token of the rank's sequence, h wide, 2 bytes.
  EXPECT_DOUBLE_EQ(a.bytes, 8.0 * 4096 * 7168 * 2);
}

TEST(MoeCosts, GroupedGemmEfficiencyFallsWithFewTokensPerExpert) {
  // ep 1: 256 experts share 8 x 4096 token copies (128 each); ep 64: 4 experts take 8192 each.
  const Plan few = MakePlan("deepseek-v3", "dp=128,tp=1,pp=1,ep=1,global_batch=128", 16);
  const Plan many = MakePlan("deepseek-v3", "dp=128,tp=1,pp=1,ep=64,global_batch=128", 16);
  const CostedOp a = MoeOp(few, OpKind::kExpertFc1), b = MoeOp(many, OpKind::kExpertFc1);
  ASSERT_EQ(a.gemms.size(), 1u);
  EXPECT_EQ(a.gemms[0].m, 128);
  EXPECT_EQ(a.gemms[0].batch, 256);
  EXPECT_EQ(b.gemms[0].m, 8192);
  EXPECT_DOUBLE_EQ(a.flops, b.flops);  // the same token copies on every rank, over 64x the experts
  EXPECT_LT(a.flops / a.time_s, 0.95 * (b.flops / b.time_s));
}

TEST(MoeCosts, DroplessImbalanceAndCapacityScaleTheBusiestExpertsWork) {
  const Plan balanced = MakePlan("mixtral-8x7b", "dp=8,tp=1,ep=8,global_batch=64", 1);
  const Plan skewed = MakePlan("mixtral-8x7b", "dp=8,tp=1,ep=8,routing=dropless:1.5,global_batch=64", 1);
  const Plan capped = MakePlan("mixtral-8x7b", "dp=8,tp=1,ep=8,routing=capacity:1.25,global_batch=64", 1);
  EXPECT_GT(MoeOp(skewed, OpKind::kExpertFc1).time_s, 1.3 * MoeOp(balanced, OpKind::kExpertFc1).time_s);
  EXPECT_DOUBLE_EQ(MoeOp(skewed, OpKind::kMoeDispatch).bytes, 1.5 * MoeOp(balanced, OpKind::kMoeDispatch).bytes);
  EXPECT_DOUBLE_EQ(MoeOp(capped, OpKind::kMoeDispatch).bytes, 1.25 * MoeOp(balanced, OpKind::kMoeDispatch).bytes);
  // Pricing only: the step takes longer, nothing else changes.
  auto a = Estimate(balanced), b = Estimate(skewed);
  ASSERT_TRUE(a && b);
  EXPECT_GT(b->step_time_s, a->step_time_s);
}

TEST(MoeCosts, DispatcherAndSharedExpertOverlapAreProfileFacts) {
  Plan p = MakePlan("llama4-maverick", "dp=16,tp=1,ep=16,global_batch=64", 2);
  const CostedOp a2a = MoeOp(p, OpKind::kMoeDispatch);
  EXPECT_GT(a2a.time_s, 0);  // TP communication overlap (this profile's) does not hide it
  EXPECT_EQ(p.implementation.moe_dispatcher.value, MoeDispatcher::kAllToAll);
  p.implementation.moe_shared_expert_overlap.value = true;
  EXPECT_LT(MoeOp(p, OpKind::kMoeDispatch).time_s, a2a.time_s);  // hidden under the shared expert
  p.implementation.moe_shared_expert_overlap.value = false;
  p.implementation.moe_dispatcher.value = MoeDispatcher::kAllGather;
  // The all-gather dispatcher moves every rank's tokens to every rank of the ep group: 16 x h per
  // token against the all-to-all's k = 1 copy.
  EXPECT_DOUBLE_EQ(MoeOp(p, OpKind::kMoeDispatch).bytes, 16 * a2a.bytes);
}

TEST(MoeCosts, DeepEpSendsATokenOncePerRemoteDomainThenForwardsItOverNvlink) {
  // 128 experts over 4 domains, top-8: a domain holds none of a token's experts with probability
  // C(96, 8) / C(128, 8); the token crosses the network to the other three domains' share.
  double none = 1;
  for (int i = 0; i < 8; ++i) none *= (96.0 - i) / (128.0 - i);
  EXPECT_NEAR(ExpectedRemoteDomains(128, 8, 4), 3 * (1 - none), 1e-12);
  EXPECT_DOUBLE_EQ(ExpectedRemoteDomains(128, 8, 1), 0.0);
  EXPECT_NEAR(ExpectedRemoteDomains(8, 1, 8), 7.0 / 8.0, 1e-12);  // top-1: the expert's own domain
  // Qwen3-235B-A22B with ep 32 over four nodes: DeepEP moves fewer bytes over the NICs than the
  // all-to-all's 8 copies, 6 of them remote; inside one node both are the NVLink all-to-all.
  Plan p = MakePlan("qwen3-235b-a22b", "dp=16,tp=2,pp=8,ep=32,etp=1,sequence_parallel=1,global_batch=128", 32);
  const CostedOp a2a = MoeOp(p, OpKind::kMoeDispatch);
  p.implementation.moe_dispatcher.value = MoeDispatcher::kDeepEp;
  const CostedOp deepep = MoeOp(p, OpKind::kMoeDispatch);
  EXPECT_DOUBLE_EQ(deepep.bytes, a2a.bytes);
  EXPECT_LT(deepep.time_s, 0.6 * a2a.time_s);
  EXPECT_GT(deepep.time_s, 0.3 * a2a.time_s);
  Plan intra = MakePlan("qwen3-235b-a22b", "dp=128,tp=2,pp=1,ep=8,etp=1,sequence_parallel=1,global_batch=128", 32);
  const double nccl = MoeOp(intra, OpKind::kMoeDispatch).time_s;
  intra.implementation.moe_dispatcher.value = MoeDispatcher::kDeepEp;
  EXPECT_DOUBLE_EQ(MoeOp(intra, OpKind::kMoeDispatch).time_s, nccl);
}

TEST(MoeCosts, MlaAndExpertFlopsAreTheCountedOnes) {
  // The catalogue at tp 1, one sequence, balanced routing, ep 1: each layer kind's forward FLOPs are
  // what counting says (one definition of the shapes).
  for (const char* name : {"deepseek-v3", "llama4-maverick", "gpt-oss-120b", "qwen3-30b-a3b"}) {
    const ModelSpec m = *ModelPreset(name);
    OpShapeKey key;
    const OpCatalogue cat = BuildOpCatalogue(m, key, *ImplementationPreset("megatron-core"));
    const ModelCounts c = CountModel(m);
    for (int64_t i = 0; i < m.layers; ++i) {
      double flops = 0;
      for (const OpSpec& o : cat.kinds[static_cast<size_t>(LayerKindOf(m, i))].fwd) flops += o.flops;
      const double counted = c.layers[static_cast<size_t>(i)].fwd_flops_per_token * static_cast<double>(m.seq_len);
      EXPECT_NEAR(flops, counted, 1e-9 * counted) << name << " layer " << i;
    }
  }
}

// DeepSeek-V3's MTP module (OpCatalogue::mtp): the shifted tokens' embedding lookup, its two norms
// and its 2h -> h projection, a transformer layer of the last layer's kind, and the shared head, in
// that order forward and in reverse backward; its FLOPs are the layer's, the head's and the
// projection's.
TEST(MoeCosts, TheMtpModuleIsAnEmbeddingItsProjectionALayerOfTheLastKindAndTheHead) {
  const ModelSpec m = *ModelPreset("deepseek-v3");
  OpShapeKey key;
  const OpCatalogue cat = BuildOpCatalogue(m, key, *ImplementationPreset("megatron-core"));
  ASSERT_FALSE(cat.mtp.fwd.empty());
  std::vector<OpKind> fwd;
  for (const OpSpec& o : cat.mtp.fwd) fwd.push_back(o.op);
  EXPECT_EQ(fwd.front(), OpKind::kEmbedding);
  EXPECT_EQ(fwd[1], OpKind::kMtpNorm);
  EXPECT_EQ(fwd[2], OpKind::kMtpProj);
  EXPECT_NE(std::find(fwd.begin(), fwd.end(), OpKind::kRouter), fwd.end());  // the last layer is MoE
  EXPECT_EQ(fwd.back(), OpKind::kLoss);
  EXPECT_EQ(cat.mtp.bwd.front().op, OpKind::kLoss);
  EXPECT_EQ(cat.mtp.bwd.back().op, OpKind::kEmbedding);
  auto flops = [](const std::vector<OpSpec>& ops) {
    double f = 0;
    for (const OpSpec& o : ops) f += o.flops;
    return f;
  };
  const double tokens = static_cast<double>(m.seq_len), h = static_cast<double>(m.hidden);
  const double proj = 2 * tokens * h * 2 * h;
  const double layer = flops(cat.kinds[static_cast<size_t>(LayerKindOf(m, m.layers - 1))].fwd);
  EXPECT_NEAR(flops(cat.mtp.fwd), layer + flops(cat.head.fwd) + proj, 1e-9 * layer);
  // Backward: each GEMM twice (input and weight gradients).
  const double layer_bwd = flops(cat.kinds[static_cast<size_t>(LayerKindOf(m, m.layers - 1))].bwd);
  EXPECT_NEAR(flops(cat.mtp.bwd), layer_bwd + flops(cat.head.bwd) + 2 * proj, 1e-9 * layer);
  // A model without MTP has no such unit.
  EXPECT_TRUE(BuildOpCatalogue(*ModelPreset("qwen3-30b-a3b"), key, *ImplementationPreset("megatron-core")).mtp.fwd.empty());
}

// Its compute lands on the stage that holds it (StageMtpModules) and nowhere else, in the closed
// form's chunk sums and in the simulated step (a layer pass at layer index layers + 0).
TEST(MoeCosts, TheMtpModulesComputeAddsToItsStageOnly) {
  Plan p = MakePlan("deepseek-v3", "dp=8,tp=1,pp=4,ep=8,zero=1,global_batch=64", 4);
  p.model.layers = 8;  // 3 dense, 5 MoE: two a stage
  Plan without = p;
  without.model.mtp_layers = 0;
  CostContext ctx(p.cluster, p.training.precision, nullptr, &p.implementation);
  CostContext ctx_without(without.cluster, without.training.precision, nullptr, &without.implementation);
  const PlanCosts with_mtp = CostPlan(ctx, p), plain = CostPlan(ctx_without, without);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_DOUBLE_EQ(with_mtp.ranks[r].fwd_s, plain.ranks[r].fwd_s) << r;
    EXPECT_DOUBLE_EQ(with_mtp.ranks[r].bwd_s, plain.ranks[r].bwd_s) << r;
  }
  const UnitOps& mtp = with_mtp.units->mtp;
  EXPECT_EQ(with_mtp.ranks[3].chunks[0].mtp, 1);
  EXPECT_NEAR(with_mtp.ranks[3].fwd_s - plain.ranks[3].fwd_s, mtp.fwd_s, 1e-12);
  EXPECT_NEAR(with_mtp.ranks[3].bwd_s - plain.ranks[3].bwd_s, mtp.bwd_s, 1e-12);  // accumulation in the GEMMs
  SimOptions o;
  o.record_trace = true;
  const auto sim = Simulate(p, nullptr, o), sim_without = Simulate(without, nullptr, o);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  ASSERT_TRUE(sim_without.ok()) << sim_without.error().message;
  EXPECT_GT(sim->prediction.step_time_s, sim_without->prediction.step_time_s);
  ASSERT_TRUE(sim->trace.has_value());
  int64_t proj = 0;  // forward and backward of each of the last stage's micro-batches
  const traces::Trace& t = *sim->trace;
  for (size_t i = 0; i < t.slices().size(); ++i) {
    const traces::Slice& sl = t.slices()[i];
    if (!sl.has(traces::slice_flags::kHasIdentity)) continue;
    const OpIdentity id = sl.identity.Unpack();
    if (id.op == OpKind::kMtpProj) {
      EXPECT_EQ(id.layer, p.model.layers);
      EXPECT_EQ(id.stage, 3);
      ++proj;
    }
  }
  EXPECT_EQ(proj, 2 * p.layout.num_microbatches());
}

TEST(MoeMemory, ExpertStateShardsOverTheExpertDataParallelGroup) {
  // ZeRO-1 on 64 GPUs, ep 8: dense optimizer state over dp 64, the experts' over edp 8.
  const Plan p = MakePlan("mixtral-8x7b", "dp=64,tp=1,ep=8,zero=1,global_batch=64", 8);
  const auto groups = RankParamGroups(p, 0);
  int64_t dense = 0, experts = 0;
  for (const ParamGroupDef& g : groups) (g.reduced_over == ReductionGroup::kExpertDp ? experts : dense) += g.params;
  const MemoryBreakdown m = EstimateRankMemory(p, 0);
  EXPECT_EQ(m.optimizer, (12 * dense + 63) / 64 + (12 * experts + 7) / 8);
  EXPECT_EQ(m.weights, 2 * (dense + experts));
  // 32 layers x 1 of the 8 experts on each rank.
  EXPECT_EQ(experts, int64_t{32} * 3 * 4096 * 14336);
  EXPECT_GT(MoeDispatchWorkspaceBytes(p), 0);
}

// DeepSeek-V3's MTP module lives on the last stage (model/stage_split.h StageMtpModules): its
// weights and state (its own groups, its experts over edp) and its activations (a layer of the
// last kind, its inputs and its pass through the head: MtpActivationBytes) add to that rank only.
TEST(MoeMemory, TheMtpModuleAddsItsStateAndActivationsToItsStageOnly) {
  Plan p = MakePlan("deepseek-v3", "dp=8,tp=1,pp=4,ep=8,zero=1,global_batch=64", 4);
  Plan without = p;
  without.model.mtp_layers = 0;
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(EstimateRankMemory(p, r).total, EstimateRankMemory(without, r).total) << r;
  }
  const MemoryBreakdown last = EstimateRankMemory(p, 3), before = EstimateRankMemory(without, 3);
  EXPECT_GT(last.weights, before.weights);
  EXPECT_GT(last.optimizer, before.optimizer);
  const int64_t mb = p.layout.num_microbatches();
  const int64_t in_flight = std::min<int64_t>(mb, 1);  // the last 1F1B stage holds one micro-batch
  ActivationOptions ao;
  ao.micro_batch = 1;
  ao.seq_len = p.model.seq_len;
  ao.bytes_per_element = 2;
  ao = ForImplementation(ao, p.implementation, p.training.precision);
  EXPECT_EQ(last.activations - before.activations, in_flight * MtpActivationBytes(p.model, ao, 1));
}

//! The megatron-core search of `model` on `nodes` DGX H100 nodes at `global_batch`, `fix` pinned.
Result<SearchResult> SearchMegatronCore(const std::string& model, int64_t nodes, int64_t global_batch,
                                        const std::string& fix, int64_t top_k) {
  ClusterSpec c = *ClusterPreset("dgx-h100");
  c.nodes = nodes;
  TrainingSpec t;
  t.global_batch = global_batch;
  SearchOptions o;
  o.implementation = *ImplementationPreset("megatron-core");
  o.top_k = top_k;
  o.threads = 1;
  o.fix = *ParseConstraints(fix);
  return Search(*ModelPreset(model), c, t, o);
}

TEST(MoeSearch, CoversEpAndEtpAndCountsExpertRejections) {
  ModelSpec m = *ModelPreset("mixtral-8x7b");
  ClusterSpec c = *ClusterPreset("dgx-h100");
  c.nodes = 2;
  auto r = SearchMegatronCore("mixtral-8x7b", 2, 64, "", 400);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_FALSE(r->plans.empty());
  bool ep_above_1 = false, etp_below_tp = false;
  for (const RankedPlan& p : r->plans) {
    ep_above_1 = ep_above_1 || p.layout.ep > 1;
    etp_below_tp = etp_below_tp || (p.layout.tp > 1 && p.layout.expert_tp() == 1);
    EXPECT_TRUE(ValidateLayout(p.layout, m, c)) << LayoutToString(p.layout);
  }
  EXPECT_TRUE(ep_above_1);
  EXPECT_TRUE(etp_below_tp);
  EXPECT_GT(r->rejected["moe_tp_needs_sequence_parallel"], 0);
  EXPECT_GT(r->rejected["expert_groups_do_not_tile_the_stage"], 0);
}

TEST(MoeRecompute, LayernormAndMoeActModulesFreeTheirActivationsForAFewMemoryBoundKernels) {
  // The Megatron-MoE model zoo's Qwen3-235B layout, which does not fit without recompute.
  const std::string layout = "dp=16,tp=2,pp=8,ep=32,etp=1,zero=1,micro_batch=1,global_batch=2048,sequence_parallel=1,"
                             "schedule=interleaved,virtual_stages=4";
  Plan none = MakePlan("qwen3-235b-a22b", layout, 32);
  Plan redo = MakePlan("qwen3-235b-a22b", layout + ",recompute_modules=layernorm+moe_act", 32);
  auto a = Estimate(none);
  auto b = Estimate(redo);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(a->fits);
  EXPECT_TRUE(b->fits) << b->peak_memory_bytes;
  // The recomputed kernels cost time, far less than the attention core's selective recompute adds.
  Plan core = MakePlan("qwen3-235b-a22b", layout + ",recompute=selective", 32);
  auto c = Estimate(core);
  ASSERT_TRUE(c);
  EXPECT_GT(b->step_time_s, a->step_time_s);
  EXPECT_LT(b->step_time_s - a->step_time_s, c->step_time_s - a->step_time_s);
  EXPECT_EQ(MoeOp(redo, OpKind::kExpertAct, Phase::kRecompute).phase, Phase::kRecompute);
}

TEST(MoeSearch, SplitsLayersThePipelineDoesNotDivideAndSearchesTheMoeRecomputeModules) {
  // DeepSeek-V3's 61 layers at pp 16 split by neither default rule: the search tries 3 + 14 x 4 + 2
  // (NeMo's H100 recipe) instead of rejecting pp 16.
  auto r = SearchMegatronCore("deepseek-v3", 64, 1024, "pp=16", 2000);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_FALSE(r->plans.empty());
  bool modules = false;
  for (const RankedPlan& p : r->plans) {
    EXPECT_EQ(p.layout.first_stage_layers, 3) << LayoutToString(p.layout);
    EXPECT_EQ(p.layout.last_stage_layers, 2) << LayoutToString(p.layout);
    modules = modules || p.layout.selective_modules() == (kRecomputeLayernorm | kRecomputeMoeAct);
  }
  EXPECT_TRUE(modules);
  EXPECT_EQ(r->rejected["pp_does_not_split_layers"], 0);
  // --fix names them: the search keeps to them, and refuses a split that does not share out.
  r = SearchMegatronCore("deepseek-v3", 64, 1024, "pp=4,first_stage_layers=15,last_stage_layers=14,recompute_modules=moe_act", 2000);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_FALSE(r->plans.empty());
  for (const RankedPlan& p : r->plans) {
    EXPECT_EQ(p.layout.first_stage_layers, 15);
    EXPECT_EQ(p.layout.selective_modules(), kRecomputeMoeAct);
  }
  r = SearchMegatronCore("deepseek-v3", 64, 1024, "pp=4,first_stage_layers=16,last_stage_layers=16", 2000);  // 29 over 2
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->plans.empty());
  EXPECT_GT(r->rejected["pp_does_not_split_layers"], 0);
}

TEST(MoeExport, MegatronGetsTheExplicitSplitAndTheRecomputeModules) {
  Plan p = MakePlan("deepseek-v3",
                    "dp=8,tp=2,pp=4,ep=8,etp=1,zero=1,global_batch=64,sequence_parallel=1,first_stage_layers=15,"
                    "last_stage_layers=14,recompute_modules=layernorm+moe_act",
                    8);
  const MegatronArgs a = ExportMegatron(p);
  std::string line;
  for (const std::string& arg : a.args) line += arg + " ";
  EXPECT_NE(line.find("--decoder-first-pipeline-num-layers 15 --decoder-last-pipeline-num-layers 14 "), std::string::npos)
      << line;
  EXPECT_NE(line.find("--recompute-granularity selective --recompute-modules layernorm moe_act "), std::string::npos)
      << line;
}

TEST(MoeExport, MegatronGetsThePipelineLayoutInPlaceOfTheStageCounts) {
  // NVIDIA's DeepSeek-V3 recipe layout (Megatron-Bridge deepseek_v3.py layout_map[(4, 4)]): Megatron
  // derives the virtual stages from it, so no per-stage or per-rank count is written beside it.
  Plan p = MakePlan("deepseek-v3",
                    "dp=8,tp=1,pp=4,ep=8,etp=1,zero=1,global_batch=64,schedule=interleaved,virtual_stages=4,"
                    "pipeline_layout=Et*4|(t*4|)*14tmL",
                    4);
  ASSERT_TRUE(ValidateLayout(p.layout, p.model, p.cluster));
  const MegatronArgs a = ExportMegatron(p);
  std::string line;
  for (const std::string& arg : a.args) line += arg + " ";
  EXPECT_NE(line.find("--pipeline-model-parallel-layout Et*4|(t*4|)*14tmL "), std::string::npos) << line;
  EXPECT_EQ(line.find("--num-virtual-stages-per-pipeline-rank"), std::string::npos) << line;
  EXPECT_EQ(line.find("--decoder-first-pipeline-num-layers"), std::string::npos) << line;
  for (const std::string& w : a.warnings) EXPECT_EQ(w.find("layers"), std::string::npos) << w;
}

// NVIDIA's DeepSeek-V3 Blackwell recipe: MXFP8 and the precision-aware optimizer with bf16 moments
// and main grads; the export names both, and neither where the profile keeps Megatron's defaults.
TEST(MoeExport, MegatronGetsTheFp8RecipeAndThePrecisionAwareOptimizer) {
  Plan p = MakePlan("deepseek-v3", "dp=8,tp=1,pp=4,ep=8,etp=1,zero=1,global_batch=64", 4);
  p.training.precision = Precision::kFp8;
  auto line_of = [](const MegatronArgs& a) {
    std::string line;
    for (const std::string& arg : a.args) line += arg + " ";
    return line;
  };
  std::string line = line_of(ExportMegatron(p));
  EXPECT_EQ(line.find("--fp8-recipe"), std::string::npos) << line;
  EXPECT_EQ(line.find("--use-precision-aware-optimizer"), std::string::npos) << line;
  p.implementation.fp8_recipe.value = Fp8Recipe::kMxfp8;
  p.implementation.optimizer_state_bytes.value = 8;
  p.implementation.optimizer_reads_grad_buffer.value = true;
  line = line_of(ExportMegatron(p));
  EXPECT_NE(line.find("--fp8-recipe mxfp8 "), std::string::npos) << line;
  EXPECT_NE(line.find("--use-precision-aware-optimizer --main-grads-dtype bf16 --exp-avg-dtype bf16 "
                      "--exp-avg-sq-dtype bf16 "),
            std::string::npos)
      << line;
  // Megatron-Core runs it only with the distributed optimizer: without, a warning and no flag.
  p.layout.zero_stage = 0;
  const MegatronArgs plain = ExportMegatron(p);
  EXPECT_EQ(line_of(plain).find("--use-precision-aware-optimizer"), std::string::npos);
  bool warned = false;
  for (const std::string& w : plain.warnings) warned = warned || w.find("distributed optimizer") != std::string::npos;
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace parallax::planner
