// Context parallelism in the cost and memory models (planner/cost/cp_costs.h): the attention core
// as cp load-balanced blocks, the ring's exchange hidden behind long blocks and exposed behind
// short ones, activations per rank divided by cp, gradients reduced over dp x cp.
#include <gtest/gtest.h>

#include "model/load.h"
#include "model/presets.h"
#include "planner/cost/plan_costs.h"
#include "planner/memory/memory_model.h"

namespace parallax::planner {
namespace {

Plan MakePlan(const std::string& layout, int64_t seq, int64_t nodes, const char* impl = "megatron-core") {
  Plan p;
  p.model = *ModelPreset("llama3-70b");
  p.model.seq_len = seq;
  p.cluster = *ResolveCluster("dgx-h100", nodes);
  p.implementation = *ImplementationPreset(impl);
  p.layout = *ParseInlineLayout(layout);
  p.training.global_batch = p.layout.global_batch;
  EXPECT_TRUE(ValidateLayout(p.layout, p.model, p.cluster)) << layout;
  return p;
}

const CostedOp& AttnCore(const UnitOps& u, Phase phase) {
  for (const auto* ops : {&u.fwd, &u.bwd}) {
    for (const CostedOp& o : *ops) {
      if (o.op == OpKind::kAttnCore && o.phase == phase) return o;
    }
  }
  ADD_FAILURE() << "no attention core";
  return u.fwd.front();
}

TEST(ContextParallelCosts, RingHidesTheExchangeBehindLongBlocksAndExposesItBehindShortOnes) {
  // tp 8 fills a node, so the cp 2 ring crosses nodes.
  for (int64_t seq : {int64_t{1024}, int64_t{65536}}) {
    const Plan one = MakePlan("dp=2,tp=8,cp=1,global_batch=16,sp=1", seq, 2);
    const Plan two = MakePlan("dp=1,tp=8,cp=2,global_batch=16,sp=1", seq, 2);
    CostContext ctx(one.cluster, Precision::kBf16, nullptr, &one.implementation);
    const UnitCosts u1 = ctx.Units(one.model, one.layout, seq);
    const UnitCosts u2 = ctx.Units(two.model, two.layout, seq);
    // Each cp rank runs cp blocks of its s / cp tokens: at least twice the block, half the whole
    // sequence's causal attention give or take the exchange.
    const double block = AttnCore(ctx.Units(one.model, *ParseInlineLayout("dp=2,tp=8"), seq / 2).layer, Phase::kFwd).time_s;
    EXPECT_GE(AttnCore(u2.layer, Phase::kFwd).time_s, 2 * block * 0.999);
    EXPECT_DOUBLE_EQ(AttnCore(u2.layer, Phase::kFwd).flops, 2 * AttnCore(ctx.Units(one.model,
                     *ParseInlineLayout("dp=2,tp=8"), seq / 2).layer, Phase::kFwd).flops);
    EXPECT_GT(u2.cp.fwd_bytes, 0);
    EXPECT_EQ(u1.cp.fwd_bytes, 0);
    if (seq == 65536) {
      EXPECT_EQ(u2.cp.fwd_exposed_s, 0) << "a 32K-token block hides its K/V exchange";
      EXPECT_LT(AttnCore(u2.layer, Phase::kFwd).time_s, 0.6 * AttnCore(u1.layer, Phase::kFwd).time_s);
    } else {
      EXPECT_GT(u2.cp.fwd_exposed_s, 0) << "a 512-token block cannot hide a transfer over the inter-node links";
    }
    EXPECT_GT(u2.cp.bwd_bytes, u2.cp.fwd_bytes);  // dK and dV go around too
  }
}

// Every unit with an attention core runs it as cp blocks: each layer kind of a model that mixes
// them (DeepSeek-V3's dense and MoE layers, both MLA) and its MTP module's layer, not layer 0's kind
// alone (before 2026-11-29 the other kinds' cores were priced without the ring).
TEST(ContextParallelCosts, EveryLayerKindAndTheMtpModuleRunTheRing) {
  Plan p;
  p.model = *ModelPreset("deepseek-v3");
  p.model.layers = 8;  // 3 dense, 5 MoE
  p.cluster = *ResolveCluster("dgx-h100", 2);
  p.implementation = *ImplementationPreset("megatron-core");
  p.layout = *ParseInlineLayout("dp=4,tp=2,cp=2,ep=8,global_batch=16,sp=1");
  p.training.global_batch = p.layout.global_batch;
  ASSERT_TRUE(ValidateLayout(p.layout, p.model, p.cluster));
  CostContext ctx(p.cluster, Precision::kBf16, nullptr, &p.implementation);
  const UnitCosts& u = ctx.Units(p.model, p.layout, p.model.seq_len);
  ASSERT_FALSE(u.layer_kind.empty());
  ASSERT_GT(u.cp.fwd_bytes, 0);
  const CostedOp& first = AttnCore(u.layer, Phase::kFwd);
  for (int64_t i = 0; i <= p.model.layers; ++i) {  // layer `layers`: the MTP module
    const CostedOp& core = AttnCore(u.Layer(i), Phase::kFwd);
    EXPECT_DOUBLE_EQ(core.time_s, first.time_s) << "layer " << i;
    EXPECT_EQ(core.kernels, first.kernels) << "layer " << i;
    EXPECT_DOUBLE_EQ(AttnCore(u.Layer(i), Phase::kBwd).time_s, AttnCore(u.layer, Phase::kBwd).time_s) << i;
  }
}

TEST(ContextParallelCosts, AllGatherAndAllToAllExchangesAreExposed) {
  Plan p = MakePlan("dp=1,tp=8,cp=2,global_batch=16,sp=1", 65536, 2);
  for (CpCommType t : {CpCommType::kAllGather, CpCommType::kA2a}) {
    p.implementation.cp_comm_type.value = t;
    CostContext ctx(p.cluster, Precision::kBf16, nullptr, &p.implementation);
    const UnitCosts& u = ctx.Units(p.model, p.layout, 65536);
    EXPECT_GT(u.cp.fwd_exposed_s, 0) << ToString(t);
    // The backward all-gathers K and V again and reduce-scatters dK, dV; the all-to-alls move the
    // same bytes both ways.
    if (t == CpCommType::kAllGather) {
      EXPECT_GT(u.cp.bwd_exposed_s, u.cp.fwd_exposed_s);
    } else {
      EXPECT_DOUBLE_EQ(u.cp.bwd_exposed_s, u.cp.fwd_exposed_s);
    }
  }
}

TEST(ContextParallelCosts, ActivationsPerRankAreDividedByCp) {
  const Plan one = MakePlan("dp=2,tp=8,cp=1,global_batch=16,sp=1", 32768, 2);
  const Plan two = MakePlan("dp=1,tp=8,cp=2,global_batch=16,sp=1", 32768, 2);
  const MemoryBreakdown m1 = EstimateRankMemory(one, 0), m2 = EstimateRankMemory(two, 0);
  EXPECT_NEAR(static_cast<double>(m2.activations) / static_cast<double>(m1.activations), 0.5, 0.01);
  // ZeRO-1 shards over dp x cp: two ranks either way.
  EXPECT_EQ(m1.optimizer, m2.optimizer);
}

TEST(ContextParallelCosts, DenseGradientsAreReducedOverDpTimesCp) {
  // dp 1, cp 2: a gradient reduction over the two cp ranks still runs (there is no dp group).
  Plan p = MakePlan("dp=1,tp=8,cp=2,zero=1,global_batch=16,sp=1", 32768, 2);
  CostContext ctx(p.cluster, Precision::kBf16, nullptr, &p.implementation);
  const PlanCosts pc = CostPlan(ctx, p);
  EXPECT_GT(pc.ranks[0].dp.grad_layer_s, 0);
  EXPECT_TRUE(pc.dp_overlapped);
}

}  // namespace
}  // namespace parallax::planner
