// CostPlan's data-parallel phase: the collectives of a rank's parameter groups (model/param_groups.h)
// by ZeRO stage, the memory passes our executor runs around them, and when the step's parameter
// gathers deliver each chunk's parameters.
#include <algorithm>
#include <vector>

#include "model/param_groups.h"
#include "planner/cost/placement.h"
#include "planner/cost/plan_cost_phases.h"
#include "model/rank_groups.h"

namespace parallax::planner {
namespace {

//! The rank's outer groups as one size-based bucket: the first group's place, all parameters and uses.
ParamGroupDef MergedGroup(const std::vector<ParamGroupDef>& groups) {
  ParamGroupDef merged = groups.front();
  merged.params = merged.bytes = 0;
  for (const ParamGroupDef& g : groups) {
    merged.params += g.params;
    merged.bytes += g.bytes;
    merged.uses_embedding = merged.uses_embedding || g.uses_embedding;
    merged.uses_head = merged.uses_head || g.uses_head;
  }
  return merged;
}

CollectiveKind GradCollective(const Layout& l) {
  return l.zero_stage == 0 ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
}

//! ZeRO-1/2: the updated parameters are gathered after the optimizer step.
bool GathersAfterStep(const Layout& l) { return l.zero_stage == 1 || l.zero_stage == 2; }

//! Our executor's ZeroPasses for a group of `params` parameters (per TP rank).
ZeroPasses ZeroPassesOf(const CostInputs& in, double params) {
  const Layout& l = in.plan.layout;
  const ComputeModel& comp = in.ctx.compute();
  auto pass = [&](OpKind op, double bytes) { return NoisyMemoryTime(comp, MemoryFamily(op, Phase::kComm), bytes); };
  ZeroPasses z;
  const double shard = params / static_cast<double>(DenseReductionRanks(l));
  if (l.zero_stage == 3) {
    z.copy_bytes = 2.0 * in.param_e * shard;
    z.copy_s = pass(OpKind::kShardCopy, z.copy_bytes);
  }
  if (l.zero_stage >= 2) {
    z.zero_bytes = 4.0 * params;
    z.zero_s = pass(OpKind::kGradZero, z.zero_bytes);
    z.fold_bytes = 12.0 * shard;
    z.fold_s = pass(OpKind::kGradFold, z.fold_bytes);
  }
  return z;
}

//! A layer group's gradient collective and, under ZeRO-3, its gathers.
void CostLayerCollectives(const CostInputs& in, const PlacedGroup& reduction, DpCost& dp) {
  const Layout& l = in.plan.layout;
  const ImplementationProfile& impl = in.ctx.implementation();
  const CollectiveModel& coll = in.ctx.collectives();
  const double layer_params = in.layer_params;
  dp.grad_layer_bytes = in.grad_e * layer_params;
  dp.param_layer_bytes = in.param_e * layer_params;
  dp.grad_layer_s = coll.Time(GradCollective(l), in.grad_e * layer_params, reduction);
  if (l.zero_stage != 3) return;
  // The part of a layer gathered ahead: all of it, or the profile's prefetch budget (DeepSpeed:
  // per module fetch, kZero3PrefetchesPerLayer of them); the rest when the layer is reached.
  const int64_t budget = impl.zero3_prefetch_params.value;
  const bool split = budget > 0 && LayerPrefetchAhead(impl) > 0 &&
                     kZero3PrefetchesPerLayer * static_cast<double>(budget) < layer_params;
  const double ahead = split ? kZero3PrefetchesPerLayer * static_cast<double>(budget) : layer_params;
  dp.gather_ahead_bytes = in.param_e * ahead;
  dp.gather_layer_s = coll.Time(CollectiveKind::kAllGather, dp.gather_ahead_bytes, reduction);
  if (split) {
    dp.gather_demand_bytes = in.param_e * (layer_params - ahead);
    dp.gather_demand_layer_s = coll.Time(CollectiveKind::kAllGather, dp.gather_demand_bytes, reduction);
  }
}

//! The groups outside the layers: one collective each with per-group buckets, one merged bucket else.
void CostOuterCollectives(const CostInputs& in, const RankCost& rc, DpCost& dp) {
  const Layout& l = in.plan.layout;
  const CollectiveModel& coll = in.ctx.collectives();
  std::vector<ParamGroupDef> groups;
  for (const ParamGroupDef& g : rc.groups) {
    if (g.kind != ParamGroupKind::kLayer && g.kind != ParamGroupKind::kExperts) groups.push_back(g);
  }
  if (!dp.per_group && !groups.empty()) groups = {MergedGroup(groups)};
  for (const ParamGroupDef& g : groups) {
    DpCost::OuterGroup o;
    o.group = g;
    o.embedding = g.uses_embedding;
    o.head = g.uses_head;
    o.grad_bytes = in.grad_e * static_cast<double>(g.params);
    o.param_bytes = static_cast<double>(g.bytes);
    const PlacedGroup reduction = PlaceReduction(l, in.ctx.cluster(), g.reduced_over);
    o.grad_s = coll.Time(GradCollective(l), o.grad_bytes, reduction);
    const double gather_s = coll.Time(CollectiveKind::kAllGather, o.param_bytes, reduction);
    if (l.zero_stage == 3) o.gather_s = gather_s;
    if (dp.per_group) o.passes = ZeroPassesOf(in, static_cast<double>(g.params));
    dp.grad_outer_s += o.grad_s;
    if (GathersAfterStep(l) && dp.per_group) {
      o.gather_after_s = gather_s;
      dp.gather_after_s += o.gather_after_s;
    }
    dp.outer.push_back(o);
  }
}

//! Per-group buckets: the memory passes each pass over a chunk runs on the compute stream (the
//! simulator walks them one by one): shard copies before the gathers of the groups a pass uses, a
//! group's zero-fill in the first backward pass adding to it, and each reduce-scatter's fold.
void AddZeroPassesToChunks(const CostInputs& in, RankCost& rc) {
  DpCost& dp = rc.dp;
  dp.layer_passes = ZeroPassesOf(in, in.layer_params);
  for (ChunkCost& cc : rc.chunks) {
    const double n = static_cast<double>(cc.units());
    double f = n * dp.layer_fwd_pass_s(), b = n * dp.layer_bwd_pass_s();
    for (const DpCost::OuterGroup& o : dp.outer) {
      // Gathered (a shard copy each) by every pass that uses it, zeroed once per backward.
      const double copies = (o.UsedBy(cc, true) ? 1.0 : 0.0) + (o.UsedBy(cc, false) ? 1.0 : 0.0);
      f += copies * o.passes.copy_s;
      b += copies * o.passes.copy_s + (copies > 0 ? o.passes.zero_s : 0.0);
      if (o.ReducedBy(cc)) b += o.passes.fold_s;
    }
    cc.fwd_s += f;
    cc.bwd_s += b;
    rc.fwd_s += f;
    rc.bwd_s += b;
  }
  // The last reduce-scatter of the step (chunk 0's last backward: the embedding's groups on the
  // first stage, else the chunk's first layer) is folded after the pipeline drains.
  const ChunkCost& first = rc.chunks.front();
  rc.final_fold_s = first.units() > 0 ? dp.layer_passes.fold_s : 0.0;
  for (const DpCost::OuterGroup& o : dp.outer) {
    if (o.ReducedBy(first)) rc.final_fold_s = o.passes.fold_s;
  }
}

//! ZeRO-1/2: the parameter all-gather after the optimizer step (per group, or the rank's whole).
void CostGatherAfterStep(const CostInputs& in, const PlacedGroup& reduction, RankCost& rc) {
  const Layout& l = in.plan.layout;
  const CollectiveModel& coll = in.ctx.collectives();
  DpCost& dp = rc.dp;
  dp.gather_overlapped = GathersAfterStep(l) && in.ctx.implementation().overlap_param_gather.value;
  if (!GathersAfterStep(l)) return;
  if (dp.per_group) {
    dp.gather_after_layer_s = coll.Time(CollectiveKind::kAllGather, in.param_e * in.layer_params, reduction);
    dp.gather_after_s += static_cast<double>(rc.units()) * dp.gather_after_layer_s;
  } else {
    dp.gather_after_s = coll.Time(CollectiveKind::kAllGather, in.param_e * static_cast<double>(rc.params), reduction);
  }
}

}  // namespace

void CostDp(const CostInputs& in, RankCost& rc) {
  const Layout& l = in.plan.layout;
  const ImplementationProfile& impl = in.ctx.implementation();
  // The layers' reduction group (each outer group places its own).
  const PlacedGroup layers = PlaceReduction(l, in.ctx.cluster(), ReducedOver(ParamGroupKind::kLayer));
  rc.dp.per_group = impl.dp_bucket_MiB.value == 0 && impl.overlap_dp_reduce.value;
  CostLayerCollectives(in, layers, rc.dp);
  CostOuterCollectives(in, rc, rc.dp);
  if (rc.dp.per_group) AddZeroPassesToChunks(in, rc);
  CostGatherAfterStep(in, layers, rc);
  CostExpertDp(in, rc);
}

void CostTiedEmbedding(const CostInputs& in, RankCost& rc) {
  if (std::none_of(rc.groups.begin(), rc.groups.end(), [](const ParamGroupDef& g) { return g.tied_pair; })) return;
  const ModelSpec& m = in.plan.model;
  const Layout& l = in.plan.layout;
  const PlacedGroup pair = PlacePipelineHop(l, in.ctx.cluster(), 0, l.pp - 1);
  rc.dp.tied_embedding_s = in.ctx.collectives().Time(
      CollectiveKind::kAllReduce,
      in.grad_e * static_cast<double>(m.vocab) * static_cast<double>(m.hidden) / static_cast<double>(l.tp), pair);
}

int64_t RankCost::units() const {
  int64_t n = 0;
  for (const ChunkCost& cc : chunks) n += cc.units();
  return n;
}

double RankCost::GradReductionAfterBackward() const {
  const bool outer = std::any_of(chunks.begin(), chunks.end(), [](const ChunkCost& cc) { return cc.embedding || cc.head; });
  return static_cast<double>(units()) * dp.grad_layer_s + (outer ? dp.grad_outer_s : 0.0);
}

std::vector<ChunkGatherReady> GatherReady(const RankCost& rc) {
  const DpCost& dp = rc.dp;
  double bytes = 0;
  for (const ChunkCost& cc : rc.chunks) bytes += dp.param_layer_bytes * static_cast<double>(cc.units());
  for (const DpCost::OuterGroup& g : dp.outer) bytes += g.param_bytes;
  // Per-group buckets gather each group as its own collective; size-based ones share the rank's.
  auto secs = [&](double b, double group_s) {
    return dp.per_group ? group_s : (bytes > 0 ? dp.gather_after_s * b / bytes : 0.0);
  };
  std::vector<ChunkGatherReady> out;
  double t = 0;
  for (const ChunkCost& cc : rc.chunks) {
    ChunkGatherReady c;
    for (const DpCost::OuterGroup& g : dp.outer) {
      if (g.GatheredBeforeLayers(cc)) t += secs(g.param_bytes, g.gather_after_s);
    }
    c.embedding = c.layers = t;
    c.per_layer = secs(dp.param_layer_bytes, dp.gather_after_layer_s);
    t += static_cast<double>(cc.units()) * c.per_layer;
    for (const DpCost::OuterGroup& g : dp.outer) {
      if (g.GatheredAfterLayers(cc)) t += secs(g.param_bytes, g.gather_after_s);
    }
    c.head = t;
    out.push_back(c);
  }
  return out;
}

}  // namespace parallax::planner
