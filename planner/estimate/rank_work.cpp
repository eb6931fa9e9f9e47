// Rank work: one micro-batch per pipeline rank, with the DP waits of ZeRO-2/3 and blocking sends.

#include <algorithm>
#include <vector>

#include "planner/estimate/step_phases.h"
#include "model/rank_groups.h"

namespace parallax::planner {
namespace {

//! Per-group buckets, ZeRO-2: the backward's waits for the one reduce-scatter in flight. A layer's
//! waits for the previous layer's, the first outer one for the last layer's (the embedding's
//! backward runs between), each later outer one for the one before it.
double PerGroupReduceScatterWait(const Plan& plan, const PlanCosts& pc, const RankCost& rc) {
  const UnitCosts& u = *pc.units;
  const double k = pc.contention;
  const double m = static_cast<double>(pc.microbatches);
  double wait = 0;
  const double R = rc.dp.grad_layer_s;
  // A layer's backward as it runs beside the busy DP stream, slowed by contention (AddZero2Waits).
  const double x = rc.layer.bwd_s + rc.dp.layer_bwd_pass_s() + (k - 1) * (rc.layer.bwd_s - rc.layer.bwd_tp_s);
  for (const ChunkCost& cc : rc.chunks) {
    const double n = static_cast<double>(cc.units());
    if (n > 1) wait += (n - 1) * std::max(0.0, R - x);
    const OuterGroups og = OuterOf(rc.dp, cc);
    if (og.any) {
      wait += (n > 0 ? std::max(0.0, R - (cc.embedding ? u.embedding.bwd_s : 0.0)) : 0.0) + og.chain;
      // The last outer one is still in flight when the next backward of the chunk issues its
      // first layer's (m - 1 times in m): after a head backward and a layer's, and under
      // 1F1B-style schedules a forward pass of the chunk too.
      const double gap = (plan.layout.schedule == ScheduleKind::kGpipe ? 0.0 : cc.fwd_s) +
                         (cc.head ? u.head.bwd_s : 0.0) + rc.layer.bwd_s + rc.dp.layer_bwd_pass_s();
      if (n > 0) wait += std::max(0.0, og.last - gap) * (m - 1) / m;
    }
  }
  return wait;
}

//! ZeRO-2: every micro-batch's backward reduce-scatters its layers' gradients on the DP stream,
//! slowing the compute beside it. A backlog that outgrows a micro-batch's compute stretches the
//! step (the DP tail, dp_tail.cpp).
void AddZero2Waits(const Plan& plan, const PlanCosts& pc, const RankCost& rc, RankWork& work) {
  const double dp_work = static_cast<double>(rc.units()) * rc.dp.grad_layer_s;
  const double cb = (pc.contention - 1) * std::min(dp_work, rc.bwd_s - rc.bwd_tp_s);
  work.bwd_s += cb;
  work.contention_s += cb;
  if (rc.dp.per_group) {
    const double wait = PerGroupReduceScatterWait(plan, pc, rc);
    work.bwd_s += wait;
    work.dp_wait_s += wait;
  }
}

//! A blocking send holds the sender for the transfer of each chunk pass it sends on.
void AddBlockingSends(const Layout& l, const PlanCosts& pc, const RankCost& rc, RankWork& work) {
  for (const ChunkCost& cc : rc.chunks) {
    if (cc.stage + 1 < l.pp * l.virtual_stages) work.fwd_s += pc.boundary_p2p_s[static_cast<size_t>(cc.stage)];
    if (cc.stage > 0) work.bwd_s += pc.boundary_p2p_s[static_cast<size_t>(cc.stage - 1)];
  }
}

}  // namespace

OuterGroups OuterOf(const DpCost& dp, const ChunkCost& cc) {
  OuterGroups o;
  if (!dp.per_group) return o;
  for (const DpCost::OuterGroup& g : dp.outer) {
    if (cc.embedding && g.embedding) o.embedding_gathers += g.gather_s;
    if (cc.head && g.head) o.head_gathers += g.gather_s;
    if (g.ReducedBy(cc)) {
      o.chain += o.last;
      o.last = g.grad_s;
      o.any = true;
    }
  }
  return o;
}

std::vector<RankWork> RankWorkOf(const Plan& plan, const PlanCosts& pc) {
  const Layout& l = plan.layout;
  std::vector<RankWork> out(static_cast<size_t>(l.pp));
  for (int64_t r = 0; r < l.pp; ++r) {
    const RankCost& rc = pc.ranks[static_cast<size_t>(r)];
    RankWork& work = out[static_cast<size_t>(r)];
    work.fwd_s = rc.fwd_s;
    work.bwd_s = rc.bwd_s;
    if (DenseReductionRanks(l) > 1 && l.zero_stage == 3) {
      AddZero3Waits(plan, pc, rc, work);
    } else if (DenseReductionRanks(l) > 1 && l.zero_stage == 2) {
      AddZero2Waits(plan, pc, rc, work);
    }
    if (pc.blocking_p2p && l.pp > 1) AddBlockingSends(l, pc, rc, work);
  }
  return out;
}

}  // namespace parallax::planner
