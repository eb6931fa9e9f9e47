#pragma once
// The phases of CostPlan (plan_costs.h), one file per concern. CostPlan runs them in this order,
// each filling its part of PlanCosts / RankCost:
//   pipeline_hops.cpp  the send/recv over each stage boundary, and the noise a receive waits for;
//   rank_ops.cpp       per pipeline rank: the chunks' passes with their sequence-parallel gradient
//                      sync and gradient accumulation, the step's gradient zero-fill, optimizer and
//                      grad-norm read; the step's world-wide grad-norm all-reduce;
//   moe_costs.cpp      MoE models: the expert groups' gradient collectives over the expert
//                      data-parallel group, the optimizer shard of dense and expert parameters;
//   dp_costs.cpp       the DP / ZeRO collectives of a rank's parameter groups (model/param_groups.h):
//                      gradient reductions, ZeRO-3 gathers, ZeRO-1/2 gathers after the step, the
//                      memory passes around them, the tied-embedding all-reduce; GatherReady.

#include <cstdint>

#include "planner/cost/plan_costs.h"

namespace parallax::planner {

//! What every phase reads: the plan, its cost models and the sizes they share.
struct CostInputs {
  const Plan& plan;
  CostContext& ctx;
  const UnitCosts& units;
  int64_t seq_len = 0;
  double grad_e = 0;        //!< bytes per gradient element on the wire (GradReduceBytes)
  double param_e = 0;       //!< bytes per weight element a gather moves
  double layer_params = 0;  //!< one layer's parameters per TP rank (MoE: the mean, experts included)
};

//! A memory pass on the compute stream, as the layer ops price theirs: kernel family `family`'s
//! measured curve (falling back to the streaming "elementwise" one), plus the mean detour.
double NoisyMemoryTime(const ComputeModel& comp, const char* family, double bytes);

// pipeline_hops.cpp
//! PlanCosts::boundary_p2p_s and p2p_s (empty / 0 when pp == 1).
void CostPipelineHops(const CostInputs& in, PlanCosts& pc);
//! System noise at pipeline receives, once the ranks' chunks are costed.
void AddReceiveNoise(const CostInputs& in, PlanCosts& pc);

// rank_ops.cpp
//! The rank's chunks with one micro-batch's forward / backward time, its parameter groups and count.
void CostChunks(const CostInputs& in, int64_t pp_rank, RankCost& rc);
//! Sequence parallelism: the whole-held parameters' gradient all-reduces over TP.
void CostSequenceParallelGrads(const CostInputs& in, RankCost& rc);
//! The profile's per-micro-batch gradient accumulation passes (none when it accumulates in the GEMM).
void CostGradAccumulation(const CostInputs& in, int64_t microbatches, RankCost& rc);
//! The step's gradient zero-fill, the optimizer and the grad-norm read of the rank's shard.
void CostOptimizerStep(const CostInputs& in, RankCost& rc);
//! PlanCosts::clip_sync_s: the world-wide grad-norm all-reduce and the noise it waits for.
void CostGradNormSync(const CostInputs& in, PlanCosts& pc);

// moe_costs.cpp
//! A layer group's parameters per TP rank: layer 0's, or for an MoE or MLA model the mean over the
//! layers with each MoE layer's experts on this rank.
double MeanLayerParams(const ModelSpec& m, const Layout& l);
//! MoE models, after CostDp: a layer's DP figures (DpCost grad_layer_s, ZeRO-3 gather_layer_s, ZeRO-1/2
//! per-group gather_after_layer_s) become the mean over the rank's layers of the dense group's
//! collective over dp plus the experts' over edp. No-op for a dense model.
void CostExpertDp(const CostInputs& in, RankCost& rc);
//! Parameters of the rank's optimizer shard: each group over its own reduction group when `sharded`.
double OptimizerShardParams(const Layout& l, const std::vector<ParamGroupDef>& groups, bool sharded);

// dp_costs.cpp
//! The rank's DP collectives (dp > 1), and the per-group memory passes they add to its chunks.
void CostDp(const CostInputs& in, RankCost& rc);
//! The all-reduce of a tied word embedding's gradient between the pipeline's ends (a rank holding
//! a tied_pair group), 0 elsewhere.
void CostTiedEmbedding(const CostInputs& in, RankCost& rc);

}  // namespace parallax::planner
