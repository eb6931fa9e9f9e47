// The fp8 precision (Transformer Engine's recipe): which GEMMs run in FP8, what the casts around
// them cost, what the FP8 weight copies take, and that nothing else changes.
#include <gtest/gtest.h>

#include "model/load.h"
#include "model/op_catalogue.h"
#include "model/param_groups.h"
#include "model/presets.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/memory/memory_model.h"
#include "tests/planner/layout_util.h"

namespace parallax::planner {
namespace {

OpShapeKey Key(bool fp8) {
  OpShapeKey k;
  k.micro_batch = 1;
  k.tp = 2;
  k.fp8_linear = fp8;
  return k;
}

TEST(Fp8Catalogue, OnlyTheLayersLinearGemmsRunInFp8WithACastBeforeEachFreshInput) {
  const ModelSpec m = *ModelPreset("llama3-8b");
  const ImplementationProfile impl = *ImplementationPreset("megatron-core");
  const OpCatalogue bf16 = BuildOpCatalogue(m, Key(false), impl);
  const OpCatalogue fp8 = BuildOpCatalogue(m, Key(true), impl);
  ASSERT_EQ(bf16.layer.fwd.size(), fp8.layer.fwd.size());
  for (const auto* list : {&fp8.layer.fwd, &fp8.layer.bwd}) {
    for (const OpSpec& o : *list) {
      const bool linear = o.op == OpKind::kQkv || o.op == OpKind::kAttnOut || o.op == OpKind::kFc1 || o.op == OpKind::kFc2;
      for (const GemmShape& g : o.gemms) EXPECT_EQ(g.fp8, linear) << ToString(o.op);
    }
  }
  for (const auto* list : {&fp8.head.fwd, &fp8.head.bwd, &fp8.embedding.fwd}) {
    for (const OpSpec& o : *list) {
      for (const GemmShape& g : o.gemms) EXPECT_FALSE(g.fp8) << ToString(o.op);  // the LM head stays 16-bit
    }
  }
  // The forward fc1 casts its input with its transpose: 4 B per element of its m x k input, one kernel.
  for (size_t i = 0; i < fp8.layer.fwd.size(); ++i) {
    const OpSpec& a = bf16.layer.fwd[i];
    const OpSpec& b = fp8.layer.fwd[i];
    EXPECT_DOUBLE_EQ(a.flops, b.flops);
    if (b.op != OpKind::kFc1) continue;
    const GemmShape& g = b.gemms.at(0);
    EXPECT_DOUBLE_EQ(b.bytes - a.bytes, 4.0 * static_cast<double>(g.m) * static_cast<double>(g.k));
    EXPECT_EQ(b.kernels - a.kernels, 1);
  }
  // Backward: the output gradient of each input-gradient GEMM is cast once; its weight-gradient
  // partner reads the transposed copies.
  for (size_t i = 0; i < fp8.layer.bwd.size(); ++i) {
    const OpSpec& a = bf16.layer.bwd[i];
    const OpSpec& b = fp8.layer.bwd[i];
    if (b.op != OpKind::kFc2) continue;
    ASSERT_EQ(b.gemms.size(), 2u);
    const GemmShape& dgrad = b.gemms[0];
    EXPECT_DOUBLE_EQ(b.bytes - a.bytes, 4.0 * static_cast<double>(dgrad.m) * static_cast<double>(dgrad.k));
  }
}

// Per-tensor current scaling computes each input's amax in a pass of its own before the cast; the
// block recipes write their scales in the cast's one pass.
TEST(Fp8Catalogue, CurrentScalingReadsEachCastInputOnceMore) {
  const ModelSpec m = *ModelPreset("llama3-8b");
  ImplementationProfile impl = *ImplementationPreset("megatron-core");
  const OpCatalogue bf16 = BuildOpCatalogue(m, Key(false), impl);
  const OpCatalogue delayed = BuildOpCatalogue(m, Key(true), impl);
  impl.fp8_recipe.value = Fp8Recipe::kTensorwise;
  const OpCatalogue current = BuildOpCatalogue(m, Key(true), impl);
  impl.fp8_recipe.value = Fp8Recipe::kMxfp8;
  const OpCatalogue mx = BuildOpCatalogue(m, Key(true), impl);
  for (size_t i = 0; i < delayed.layer.fwd.size(); ++i) {
    const double cast = delayed.layer.fwd[i].bytes - bf16.layer.fwd[i].bytes;
    EXPECT_DOUBLE_EQ(current.layer.fwd[i].bytes - bf16.layer.fwd[i].bytes, 1.5 * cast) << ToString(delayed.layer.fwd[i].op);
    EXPECT_EQ(current.layer.fwd[i].kernels - bf16.layer.fwd[i].kernels,
              3 * (delayed.layer.fwd[i].kernels - bf16.layer.fwd[i].kernels));
    // MXFP8 writes an E8M0 scale per 32 elements beside each of its two copies: 1/16 B more than the
    // delayed cast's 4 B an element.
    EXPECT_DOUBLE_EQ(mx.layer.fwd[i].bytes - bf16.layer.fwd[i].bytes, cast * (4.0 + 1.0 / 16) / 4.0);
    EXPECT_EQ(mx.layer.fwd[i].kernels, delayed.layer.fwd[i].kernels);
  }
}

// Under sequence parallelism current scaling quantizes before the all-gather over tp, with one scale
// for the gathered tensor: the ranks' amaxes are all-reduced (one fp32, MAX) over tp first, for the
// column-parallel inputs (qkv, fc1) forward and the row-parallel output gradients (attention output,
// fc2) backward. Delayed scaling, and current scaling without sequence parallelism, have none.
TEST(Fp8Catalogue, CurrentScalingWithSequenceParallelReducesEachGatheredInputsAmaxOverTp) {
  const ModelSpec m = *ModelPreset("llama3-8b");
  ImplementationProfile impl = *ImplementationPreset("megatron-core");
  OpShapeKey sp = Key(true);
  sp.sequence_parallel = true;
  const OpCatalogue delayed = BuildOpCatalogue(m, sp, impl);
  impl.fp8_recipe.value = Fp8Recipe::kTensorwise;
  const OpCatalogue current = BuildOpCatalogue(m, sp, impl);
  EXPECT_EQ(BuildOpCatalogue(m, Key(true), impl).layer.fwd.size(), BuildOpCatalogue(m, Key(false), impl).layer.fwd.size());
  const auto amax_then_gather_into = [](const std::vector<OpSpec>& ops) {
    std::vector<OpKind> fed;
    for (size_t i = 0; i + 2 < ops.size(); ++i) {
      if (ops[i].op != OpKind::kTpAllReduce || ops[i].bytes != 4) continue;
      EXPECT_EQ(ops[i + 1].op, OpKind::kTpAllGather);
      fed.push_back(ops[i + 2].op);
    }
    return fed;
  };
  EXPECT_EQ(current.layer.fwd.size(), delayed.layer.fwd.size() + 2);
  EXPECT_EQ(current.layer.bwd.size(), delayed.layer.bwd.size() + 2);
  EXPECT_EQ(amax_then_gather_into(current.layer.fwd), (std::vector<OpKind>{OpKind::kQkv, OpKind::kFc1}));
  EXPECT_EQ(amax_then_gather_into(current.layer.bwd), (std::vector<OpKind>{OpKind::kFc2, OpKind::kAttnOut}));
  EXPECT_TRUE(amax_then_gather_into(delayed.layer.fwd).empty());
}

TEST(Fp8Catalogue, TheRoutedExpertsGemmsRunInFp8AndTheRouterStays16Bit) {
  const ModelSpec m = *ModelPreset("mixtral-8x7b");
  const ImplementationProfile impl = *ImplementationPreset("megatron-core");
  OpShapeKey k = Key(true);
  k.ep = 8;
  k.etp = 1;
  const OpCatalogue fp8 = BuildOpCatalogue(m, k, impl);
  int expert_gemms = 0;
  for (const auto* list : {&fp8.layer.fwd, &fp8.layer.bwd}) {
    for (const OpSpec& o : *list) {
      const bool expert = o.op == OpKind::kExpertFc1 || o.op == OpKind::kExpertFc2;
      for (const GemmShape& g : o.gemms) {
        if (o.op == OpKind::kRouter) {
          EXPECT_FALSE(g.fp8);
        }
        if (expert) {
          EXPECT_TRUE(g.fp8);
        }
        expert_gemms += expert ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(expert_gemms, 6);  // fc1 and fc2: one forward GEMM, two backward
}

TEST(Fp8Memory, AnMoeLayersWeightCopiesCoverOnlyTheRanksExperts) {
  Plan p;
  p.model = *ModelPreset("mixtral-8x7b");
  p.cluster = *ClusterPreset("dgx-h100");
  p.cluster.nodes = 2;
  p.layout = *ParseInlineLayout("dp=16,tp=1,pp=1,ep=8,global_batch=64");
  p.training.precision = Precision::kFp8;
  // 1 B copy + 1 B transpose of each parameter of the rank's layers: attention and norms whole, one
  // of the 8 experts.
  int64_t params = 0;
  for (const ParamGroupDef& g : RankParamGroups(p, 0)) {
    if (g.kind == ParamGroupKind::kLayer || g.kind == ParamGroupKind::kExperts) params += g.params;
  }
  EXPECT_EQ(Fp8WeightCopyBytes(p, 0), 2 * params);
  EXPECT_LT(Fp8WeightCopyBytes(p, 0), 2 * p.model.layers * LayerParamsPerTpRank(p.model, 1) / 4);
}

TEST(Fp8Cost, LinearGemmsRunFasterButNotTwiceAndAttentionIsUnchanged) {
  const ClusterSpec c = *ClusterPreset("dgx-h100");
  const ModelSpec m = *ModelPreset("llama3-8b");
  const ImplementationProfile impl = *ImplementationPreset("megatron-core");
  CostContext bf16(c, Precision::kBf16, nullptr, &impl), fp8(c, Precision::kFp8, nullptr, &impl);
  Layout l = testing::L(8, 1, 1);
  l.micro_batch = 1;
  const UnitOps& a = bf16.Units(m, l, m.seq_len).layer;
  const UnitOps& b = fp8.Units(m, l, m.seq_len).layer;
  ASSERT_EQ(a.fwd.size(), b.fwd.size());
  for (size_t i = 0; i < a.fwd.size(); ++i) {
    const CostedOp& x = a.fwd[i];
    const CostedOp& y = b.fwd[i];
    if (x.op == OpKind::kQkv || x.op == OpKind::kAttnOut || x.op == OpKind::kFc1 || x.op == OpKind::kFc2) {
      // The GEMM at up to twice the rate; the casts are extra memory traffic.
      EXPECT_LT(y.time_s, x.time_s) << ToString(x.op);
      EXPECT_GT(y.time_s, 0.5 * x.time_s) << ToString(x.op);
      EXPECT_GT(y.memory_time_s, x.memory_time_s) << ToString(x.op);
    } else {
      EXPECT_DOUBLE_EQ(y.time_s, x.time_s) << ToString(x.op);  // attention, norms, activations: bf16
    }
  }
  EXPECT_LT(b.fwd_s + b.bwd_s, a.fwd_s + a.bwd_s);
}

TEST(Fp8Cost, AnFp8StepIsFasterAndItsWeightCopiesAreCountedInMemory) {
  const ClusterSpec c = *ResolveCluster("dgx-h100", 4);
  Plan plan;
  plan.model = *ModelPreset("llama3-8b");
  plan.cluster = c;
  plan.implementation = *ImplementationPreset("megatron-core");
  plan.layout = *ParseInlineLayout("dp=8,tp=4,pp=1,zero=1,micro_batch=1,global_batch=64,recompute=selective,sp=1");
  Plan fp8 = plan;
  fp8.training.precision = Precision::kFp8;
  const auto bf16_p = Estimate(plan);
  const auto fp8_p = Estimate(fp8);
  ASSERT_TRUE(bf16_p) << bf16_p.error().message;
  ASSERT_TRUE(fp8_p) << fp8_p.error().message;
  const double bf16_s = bf16_p->step_time_s, fp8_s = fp8_p->step_time_s;
  EXPECT_LT(fp8_s, bf16_s);
  EXPECT_GT(fp8_s, 0.5 * bf16_s);
  const int64_t copies = Fp8WeightCopyBytes(fp8, 0);
  EXPECT_EQ(copies, 2 * plan.model.layers * LayerParamsPerTpRank(plan.model, 4));
  EXPECT_EQ(Fp8WeightCopyBytes(plan, 0), 0);
  EXPECT_EQ(EstimateRankMemory(fp8, 0).weights - EstimateRankMemory(plan, 0).weights, copies);
}

// Transformer Engine's FP8 parameters (the nemo profile's fp8_params): the FP8 data and its
// transpose replace the 16-bit weights, so an fp8 rank holds no more weight bytes than a bf16 one.
TEST(Fp8Cost, Fp8ParametersReplaceTheSixteenBitWeightsInsteadOfAddingCopies) {
  Plan plan;
  plan.model = *ModelPreset("llama3-8b");
  plan.cluster = *ResolveCluster("dgx-h100", 4);
  plan.layout = *ParseInlineLayout("dp=8,tp=4,pp=1,zero=1,micro_batch=1,global_batch=64,recompute=selective,sp=1");
  plan.training.precision = Precision::kFp8;
  plan.implementation = *ImplementationPreset("nemo");
  ASSERT_TRUE(plan.implementation.fp8_params.value);
  EXPECT_EQ(Fp8WeightCopyBytes(plan, 0), 0);
  Plan bf16 = plan;
  bf16.training.precision = Precision::kBf16;
  EXPECT_EQ(EstimateRankMemory(plan, 0).weights, EstimateRankMemory(bf16, 0).weights);
  Plan copies = plan;
  copies.implementation = *ImplementationPreset("megatron-core");
  EXPECT_GT(EstimateRankMemory(copies, 0).weights, EstimateRankMemory(plan, 0).weights);
}

}  // namespace
}  // namespace parallax::planner
