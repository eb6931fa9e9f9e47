// Memory model: bytes per parameter by precision and ZeRO stage (Rajbhandari et al. 2020),
// in-flight micro-batches against the executor's schedule order, stage partition.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/counting.h"
#include "model/implementation.h"
#include "model/presets.h"
#include "model/schedule.h"
#include "model/stage_split.h"
#include "planner/memory/memory_model.h"

namespace parallax::planner {
namespace {

Plan MakePlan(const std::string& model, const std::string& layout, Precision precision, int64_t gpus) {
  Plan p;
  p.model = *ModelPreset(model);
  p.cluster = *ClusterPreset("dgx-a100");
  p.cluster.nodes = std::max<int64_t>(1, gpus / 8);
  p.layout = *ParseInlineLayout(layout);
  p.training.precision = precision;
  p.training.global_batch = p.layout.global_batch;
  return p;
}

TEST(MemoryModel, Fp32AndMixedBytesPerParameter) {
  const Plan fp32 = MakePlan("gpt-1.3b", "dp=8,global_batch=64", Precision::kFp32, 8);
  const Plan bf16 = MakePlan("gpt-1.3b", "dp=8,global_batch=64", Precision::kBf16, 8);
  const int64_t phi = RankParams(fp32.model, fp32.layout, 0);
  const auto a = EstimateRankMemory(fp32, 0);
  EXPECT_EQ(a.weights, 4 * phi);
  EXPECT_EQ(a.gradients, 4 * phi);
  EXPECT_EQ(a.optimizer, 8 * phi);
  const auto b = EstimateRankMemory(bf16, 0);
  EXPECT_EQ(b.weights, 2 * phi);
  EXPECT_EQ(b.gradients, 4 * phi);  // fp32 gradient buffer (parallax profile, as Megatron-Core)
  EXPECT_EQ(b.optimizer, 12 * phi);
  EXPECT_EQ(b.total, b.weights + b.gradients + b.optimizer + b.activations + b.workspace + b.reserve);
  // tp=1, pp=1: the one rank holds every parameter of the model.
  EXPECT_EQ(phi, CountModel(fp32.model).params_total);
}

// Megatron-Core's precision-aware optimizer (--use-precision-aware-optimizer, bf16 moments, bf16
// main grads): 4 + 2 + 2 bytes of state and no fp32 copy of a 16-bit gradient for the step, with
// the distributed optimizer only (Megatron-Core refuses it without): at ZeRO 0 the facts do not apply.
TEST(MemoryModel, PrecisionAwareOptimizerKeepsItsStateInItsDtypes) {
  Plan p = MakePlan("gpt-1.3b", "dp=8,zero=1,global_batch=64", Precision::kBf16, 8);
  p.implementation = *ImplementationPreset("megatron-core");
  p.implementation.grad_buffer_dtype.value = GradDType::kParam;
  p.training.seq_len = 8;  // few activations: the step's fp32 gradient copy outgrows them
  const int64_t phi = RankParams(p.model, p.layout, 0);
  const auto classic = EstimateRankMemory(p, 0);
  EXPECT_EQ(classic.gradients, 2 * phi);
  EXPECT_GT(classic.optimizer, (12 * phi + 7) / 8);  // + the step's fp32 gradient copy beyond the activations
  p.implementation.optimizer_state_bytes.value = 8;
  p.implementation.optimizer_reads_grad_buffer.value = true;
  const auto aware = EstimateRankMemory(p, 0);
  EXPECT_EQ(aware.optimizer, (8 * phi + 7) / 8);
  EXPECT_EQ(aware.gradients, 2 * phi);
  p.layout.zero_stage = 0;
  const auto unsharded = EstimateRankMemory(p, 0);
  p.implementation = *ImplementationPreset("megatron-core");
  p.implementation.grad_buffer_dtype.value = GradDType::kParam;
  EXPECT_EQ(unsharded.total, EstimateRankMemory(p, 0).total);
}

TEST(MemoryModel, ZeroStagesShardProgressively) {
  int64_t prev_states = INT64_MAX;
  for (int zero = 0; zero <= 3; ++zero) {
    const Plan p = MakePlan("llama-7b", "dp=8,zero=" + std::to_string(zero) + ",global_batch=64", Precision::kBf16, 8);
    const auto m = EstimateRankMemory(p, 0);
    const int64_t phi = RankParams(p.model, p.layout, 0);
    const int64_t states = m.weights + m.gradients + m.optimizer;
    EXPECT_LT(states, prev_states) << "zero " << zero;
    prev_states = states;
    EXPECT_EQ(m.optimizer, zero >= 1 ? (12 * phi + 7) / 8 : 12 * phi);
    EXPECT_EQ(m.gradients, zero >= 2 ? (4 * phi + 7) / 8 : 4 * phi);
    EXPECT_EQ(m.weights, zero >= 3 ? (2 * phi + 7) / 8 : 2 * phi);
  }
}

// One bucket definition (DpBucketBytes): ZeRO-2 stages two buckets of unsharded fp32 gradient.
// Our executor reduces a whole layer at once (llama-7b: 202M parameters, 809 MB of fp32 gradient
// per layer), Megatron-Core in 40M-element buckets (153 MiB); the workspace differs by exactly
// two buckets' difference.
TEST(MemoryModel, ZeroTwoStagesTwoBucketsOfTheImplementation) {
  Plan ours = MakePlan("llama-7b", "dp=8,zero=2,global_batch=64", Precision::kBf16, 8);
  Plan mcore = ours;
  mcore.implementation = *ImplementationPreset("megatron-core");
  const int64_t layer_grad = 4 * LayerParamsPerTpRank(ours.model, 1);
  EXPECT_EQ(DpBucketBytes(ours.implementation, layer_grad), layer_grad);
  EXPECT_EQ(DpBucketBytes(mcore.implementation, layer_grad), 153LL << 20);
  const auto a = EstimateRankMemory(ours, 0);
  const auto b = EstimateRankMemory(mcore, 0);
  // The transient part: the workspace less the allocator margin over what is modelled.
  auto transient = [](const MemoryBreakdown& m) {
    return m.workspace - static_cast<int64_t>(kAllocatorMargin * static_cast<double>(m.weights + m.gradients +
                                                                                       m.optimizer + m.activations));
  };
  // Same model, layout and micro-batch: the same 2*e*sbh and no ZeRO-3 gather; our executor's unfused
  // attention adds its score working set, Megatron-Core's flash attention none.
  EXPECT_EQ(UnfusedAttentionWorkspaceBytes(mcore), 0);
  const int64_t activation_transient_diff = UnfusedAttentionWorkspaceBytes(ours);
  EXPECT_GT(activation_transient_diff, 0);
  EXPECT_EQ(transient(a) - transient(b), 2 * (layer_grad - (153LL << 20)) + activation_transient_diff);
}

// The score working set of our executor's unfused attention (executor/cuda/cuda_kernels.cpp): fp32
// scores and P / dS in the activations' dtype for a chunk of (sequence, kv head) items whose
// scores fit 256 MiB, at least one item.
TEST(MemoryModel, UnfusedAttentionWorkingSetIsOneChunk) {
  constexpr int64_t kMiB = 1 << 20;
  // gpt-1.3b, seq 2048, 16 heads: 16 MiB of fp32 scores per item, 16 items per micro-batch.
  const Plan one = MakePlan("gpt-1.3b", "global_batch=8,micro_batch=1", Precision::kBf16, 1);
  EXPECT_EQ(UnfusedAttentionWorkspaceBytes(one), 16 * 2048 * 2048 * (4 + 2));  // 384 MiB
  const Plan four = MakePlan("gpt-1.3b", "global_batch=8,micro_batch=4", Precision::kBf16, 1);
  EXPECT_EQ(UnfusedAttentionWorkspaceBytes(four), 384 * kMiB);  // capped at one 256 MiB chunk of scores
  const Plan tp2 = MakePlan("gpt-1.3b", "tp=2,global_batch=8,micro_batch=1", Precision::kBf16, 2);
  EXPECT_EQ(UnfusedAttentionWorkspaceBytes(tp2), 8 * 2048 * 2048 * (4 + 2));  // half the heads per rank
}

TEST(MemoryModel, RecomputeAndSequenceParallelShrinkActivations) {
  const auto none = EstimateRankMemory(MakePlan("gpt-1.3b", "dp=4,tp=2,global_batch=64,micro_batch=2", Precision::kBf16, 8), 0);
  const auto sel = EstimateRankMemory(MakePlan("gpt-1.3b", "dp=4,tp=2,global_batch=64,micro_batch=2,recompute=selective", Precision::kBf16, 8), 0);
  const auto full = EstimateRankMemory(MakePlan("gpt-1.3b", "dp=4,tp=2,global_batch=64,micro_batch=2,recompute=full", Precision::kBf16, 8), 0);
  const auto sp = EstimateRankMemory(MakePlan("gpt-1.3b", "dp=4,tp=2,global_batch=64,micro_batch=2,sp=1", Precision::kBf16, 8), 0);
  EXPECT_GT(none.activations, sel.activations);
  EXPECT_GT(sel.activations, full.activations);
  EXPECT_GT(none.activations, sp.activations);
}

TEST(MemoryModel, InFlightMatchesTheScheduleOrder) {
  // The peak count of forwards whose backward has not run yet, walking PipelineOrder itself.
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    for (int64_t pp : {2, 4, 8}) {
      for (int64_t m : {pp, 2 * pp, 3 * pp}) {
        for (int64_t v : {1, 2, 3}) {
          if ((kind == ScheduleKind::kInterleaved) != (v > 1)) continue;
          for (int64_t r = 0; r < pp; ++r) {
            int64_t live = 0, peak = 0;
            for (const PipeOp& op : PipelineOrder(kind, pp, r, m, v)) {
              live += op.kind == PipeOpKind::kForward ? 1 : -1;
              peak = std::max(peak, live);
            }
            const auto per_chunk = InFlightPerChunk(kind, pp, r, m, v);
            int64_t total = 0;
            for (int64_t n : per_chunk) total += n;
            EXPECT_EQ(total, peak) << ToString(kind) << " pp=" << pp << " m=" << m << " v=" << v << " rank " << r;
          }
        }
      }
    }
  }
}

TEST(MemoryModel, PeakIsMaxOverPipelineRanksAndFirstStageHoldsMost) {
  const Plan p = MakePlan("gpt-1.3b", "dp=2,pp=4,global_batch=64,micro_batch=2", Precision::kBf16, 8);
  int64_t peak = 0;
  for (int64_t r = 0; r < 4; ++r) peak = std::max(peak, EstimateRankMemory(p, r).total);
  EXPECT_EQ(PeakMemoryBytes(p), peak);
  EXPECT_GT(EstimateRankMemory(p, 0).activations, EstimateRankMemory(p, 2).activations);
}

TEST(StagePartition, UnevenSplitsCoverEveryLayerOnce) {
  for (int64_t layers : {24, 25, 31, 105}) {
    for (int64_t stages : {1, 2, 3, 7, 8}) {
      int64_t next = 0;
      for (int64_t s = 0; s < stages; ++s) {
        const LayerRange r = StageLayers(layers, stages, s);
        EXPECT_EQ(r.first, next);
        EXPECT_TRUE(r.count == layers / stages || r.count == layers / stages + 1);
        next += r.count;
      }
      EXPECT_EQ(next, layers);
    }
  }
}

}  // namespace
}  // namespace parallax::planner
