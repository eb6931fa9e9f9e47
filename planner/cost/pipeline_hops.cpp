// CostPlan's pipeline phase: one activation (or gradient) transfer over each stage boundary.
#include <algorithm>
#include <vector>

#include "model/stage_split.h"
#include "planner/cost/placement.h"
#include "planner/cost/plan_cost_phases.h"

namespace parallax::planner {

void CostPipelineHops(const CostInputs& in, PlanCosts& pc) {
  const Layout& l = in.plan.layout;
  if (l.pp <= 1) return;
  const CollectiveModel& coll = in.ctx.collectives();
  const int64_t stages = ModelStages(l);
  // Send/recv between stages: Megatron's scatter/gather (Narayanan et al. SC'21, section 4.1)
  // sends 1/tp of the activation per TP rank, then all-gathers it over NVLink. Each boundary is
  // placed on its own: whether its rank pairs share a node depends on where the stages sit.
  // With context parallelism each rank sends its s / cp tokens (the cp ranks of a stage send at once).
  const double e = static_cast<double>(in.ctx.compute().element_bytes());
  const double act = e * static_cast<double>(l.micro_batch * (in.seq_len / l.cp) * in.plan.model.hidden);
  const PlacedGroup tpg = PlaceGroup(l, in.ctx.cluster(), GroupKind::kTp);
  const double gather = l.tp > 1 && !l.sequence_parallel ? coll.Time(CollectiveKind::kAllGather, act, tpg) : 0.0;
  std::vector<double> hop_s(static_cast<size_t>(l.pp), 0.0);  // pipeline rank r -> (r + 1) % pp
  for (int64_t r = 0; r < std::min(l.pp, stages - 1); ++r) {
    const PlacedGroup hop = PlacePipelineHop(l, in.ctx.cluster(), r, (r + 1) % l.pp);
    hop_s[static_cast<size_t>(r)] = coll.Time(CollectiveKind::kSendRecv, act / static_cast<double>(l.tp), hop) + gather;
  }
  for (int64_t s = 0; s + 1 < stages; ++s) {
    pc.boundary_p2p_s.push_back(hop_s[static_cast<size_t>(s % l.pp)]);
    pc.p2p_s = std::max(pc.p2p_s, pc.boundary_p2p_s.back());
  }
}

void AddReceiveNoise(const CostInputs& in, PlanCosts& pc) {
  const ComputeModel& comp = in.ctx.compute();
  if (!comp.noise().measured() || pc.boundary_p2p_s.empty()) return;
  // Each boundary's transfer ends when the sending rank's pass over its chunk (the compute since
  // its previous receive) ends, so a receiver that waits waits for the later of two ranks: the
  // excess of a 2-rank synchronization after one pass.
  const int64_t pp = in.plan.layout.pp;
  pc.p2p_s = 0;
  for (size_t s = 0; s < pc.boundary_p2p_s.size(); ++s) {
    const int64_t stage = static_cast<int64_t>(s);
    // Stage s is chunk s / pp of pipeline rank s % pp (the inverse of ModelStage).
    const ChunkCost& cc = pc.ranks[static_cast<size_t>(stage % pp)].chunks[static_cast<size_t>(stage / pp)];
    pc.boundary_p2p_s[s] += comp.noise().SyncExcess(0.5 * (cc.fwd_s + cc.bwd_s), 2);
    pc.p2p_s = std::max(pc.p2p_s, pc.boundary_p2p_s[s]);
  }
}

}  // namespace parallax::planner
