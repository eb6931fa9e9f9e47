// CostPlan's mixture-of-experts parts outside the layer ops (those are the op catalogue's: router,
// permute, dispatch / combine over the ep group, grouped expert GEMMs, unpermute; priced in
// layer_ops.cpp): the expert groups' gradient collectives over the expert data-parallel group, and
// the optimizer shard of a rank holding experts. Which groups exist and over which ranks they are
// reduced is model/param_groups.h's.
#include "planner/cost/moe_costs.h"

#include <algorithm>

#include "model/param_groups.h"
#include "planner/cost/placement.h"
#include "planner/cost/plan_cost_phases.h"

namespace parallax::planner {

double MeanLayerParams(const ModelSpec& m, const Layout& l) {
  if (!m.moe() && !m.mla()) return static_cast<double>(LayerParamsPerTpRank(m, l.tp));
  // Layers differ only by their experts: one dense and one MoE layer counted.
  const int64_t moe = MoeLayerCount(m), dense = m.layers - moe;
  int64_t first_dense = 0, first_moe = 0;
  while (first_dense < m.layers && IsMoeLayer(m, first_dense)) ++first_dense;
  while (first_moe < m.layers && !IsMoeLayer(m, first_moe)) ++first_moe;
  double sum = 0;
  if (dense > 0) sum += static_cast<double>(dense * LayerParamsPerTpRank(m, l.tp, first_dense));
  if (moe > 0) sum += static_cast<double>(moe * (LayerParamsPerTpRank(m, l.tp, first_moe) + ExpertParamsPerRank(m, l)));
  return sum / static_cast<double>(m.layers);
}

void CostExpertDp(const CostInputs& in, RankCost& rc) {
  const ModelSpec& m = in.plan.model;
  const Layout& l = in.plan.layout;
  if (!m.moe()) return;
  const CollectiveModel& coll = in.ctx.collectives();
  const PlacedGroup dense = PlaceReduction(l, in.ctx.cluster(), ReductionGroup::kDpCp);
  const PlacedGroup experts = PlaceReduction(l, in.ctx.cluster(), ReductionGroup::kExpertDp);
  const CollectiveKind grad = l.zero_stage == 0 ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
  // The closed form and the simulator take one figure per layer: the mean over the rank's layers of
  // the dense group's collective over dp plus, for an MoE layer, its experts' over edp.
  double grad_s = 0, gather_s = 0, layers = 0;
  for (const ParamGroupDef& g : rc.groups) {
    if (g.kind != ParamGroupKind::kLayer && g.kind != ParamGroupKind::kExperts) continue;
    const PlacedGroup& over = g.kind == ParamGroupKind::kExperts ? experts : dense;
    const double params = static_cast<double>(g.params);
    grad_s += coll.Time(grad, in.grad_e * params, over);
    gather_s += coll.Time(CollectiveKind::kAllGather, in.param_e * params, over);
    layers += g.kind == ParamGroupKind::kLayer ? 1 : 0;
  }
  if (layers == 0) return;
  DpCost& dp = rc.dp;
  dp.grad_layer_s = grad_s / layers;
  if (l.zero_stage == 3) {
    dp.gather_layer_s = gather_s / layers;
    dp.gather_demand_layer_s = 0;
  }
  if ((l.zero_stage == 1 || l.zero_stage == 2) && dp.per_group) {
    const double before = dp.gather_after_layer_s;
    dp.gather_after_layer_s = gather_s / layers;
    dp.gather_after_s += layers * (dp.gather_after_layer_s - before);
  }
}

double OptimizerShardParams(const Layout& l, const std::vector<ParamGroupDef>& groups, bool sharded) {
  double shard = 0;
  for (const ParamGroupDef& g : groups) {
    const int64_t n = sharded ? ReductionGroupSize(l, g.reduced_over) : 1;
    shard += static_cast<double>(g.params) / static_cast<double>(n);
  }
  return shard;
}

double ExpectedRemoteDomains(int64_t experts, int64_t k, int64_t domains) {
  if (domains <= 1 || experts <= 0) return 0;
  const double e = static_cast<double>(experts);
  const double elsewhere = e - e / static_cast<double>(domains);  // experts outside one given domain
  double none = 1;  // P(a given domain holds none of the token's k experts)
  for (int64_t i = 0; i < k; ++i) none *= std::max(0.0, (elsewhere - static_cast<double>(i)) / (e - static_cast<double>(i)));
  return static_cast<double>(domains - 1) * (1 - none);
}

double DeepEpDispatchTime(const CollectiveModel& coll, double copy_bytes, int64_t k, int64_t experts,
                          const PlacedGroup& ep) {
  const double copies = copy_bytes * static_cast<double>(k);
  if (!ep.spans_nodes()) return coll.Time(CollectiveKind::kAllToAll, copies, ep);
  const PlacedGroup nic{.size = 2, .ranks_per_node = 1, .nodes = 2, .gpus_per_node = ep.gpus_per_node};
  const PlacedGroup domain{.size = ep.ranks_per_node, .ranks_per_node = ep.ranks_per_node, .nodes = 1,
                           .gpus_per_node = ep.gpus_per_node};
  const double network = coll.Time(CollectiveKind::kSendRecv, copy_bytes * ExpectedRemoteDomains(experts, k, ep.nodes), nic);
  return std::max(network, coll.Time(CollectiveKind::kAllToAll, copies, domain));
}

}  // namespace parallax::planner
