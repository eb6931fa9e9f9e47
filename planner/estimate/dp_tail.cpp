// The DP tail of a step: the gradient collectives each rank's last backward leaves exposed, the
// ZeRO-2/3 final fold and the tied-embedding all-reduce, then the grad-norm sync, the optimizer
// step and the after-step parameter gather.

#include <algorithm>
#include <vector>

#include "planner/estimate/step_phases.h"
#include "model/rank_groups.h"

namespace parallax::planner {
namespace {

//! Consecutive backward passes that end pipeline rank r's order (model/schedule.cpp); under ZeRO-0/1
//! only as far back as the first chunk's last pass (the last bucket release that matters).
int64_t TrailingBackwards(const Layout& l, int64_t r, int64_t mb) {
  const int64_t p = l.pp, v = l.virtual_stages;
  int64_t trailing = 1;
  if (l.schedule == ScheduleKind::kGpipe) {
    trailing = mb;
  } else if (v == 1) {
    trailing = std::min(p - r - 1, mb) + 1;
  } else {
    trailing = mb == p ? mb * v : std::min((p - r - 1) * 2 + (v - 1) * p + 1, mb * v);
  }
  if (l.zero_stage <= 1) trailing = std::min(trailing, (v - 1) * p + 1);
  return trailing;
}

//! ZeRO-0/1/2 streamed per bucket: the DP stream as one machine fed by bucket releases (layer buckets
//! as each layer's backward ends, the embedding/head bucket at its chunk's end); it ends at max over
//! buckets j of (release_j + the work released from j on), relative to the rank's last backward.
//! Pass j from the end (j = 0 last) ends j chunk backwards before the last and belongs to chunk
//! (j / pp) % v (Megatron's interleaved cool-down runs chunks v-1 .. 0, pp micro-batches each).
//! ZeRO-0/1 reduce after each chunk's last pass (j = c pp); ZeRO-2 after every pass.
double BucketReleaseEnd(const Plan& plan, const PlanCosts& pc, const RankCost& rc, double chunk_bwd, int64_t trailing) {
  const Layout& l = plan.layout;
  const int64_t p = l.pp, v = l.virtual_stages;
  const UnitCosts& u = *pc.units;
  const double R = rc.dp.grad_layer_s;
  const double beta = rc.layer.bwd_s;
  double dp_end = 0, suffix = 0;
  for (int64_t j = 0; j < trailing; ++j) {
    const int64_t c = (j / p) % v;
    if (l.zero_stage <= 1 && j != c * p) continue;
    const ChunkCost& cc = rc.chunks[static_cast<size_t>(c)];
    const double pass_end = -static_cast<double>(j) * chunk_bwd;
    if (cc.embedding || cc.head) {
      suffix += rc.dp.grad_outer_s;
      dp_end = std::max(dp_end, pass_end + suffix);
    }
    const double n = static_cast<double>(cc.units());
    if (n > 0) {
      const double layers_end = pass_end - (cc.embedding ? u.embedding.bwd_s : 0.0);
      dp_end = std::max({dp_end, layers_end + R + suffix, layers_end - (n - 1) * beta + n * R + suffix});
    }
    suffix += n * R;
  }
  return dp_end;
}

//! ZeRO-2: the backlog of all micro-batches' reduce-scatters beyond the compute that hides them.
//! They start with the first backward: under GPipe all forwards come first, so only the backward
//! phase hides them; 1F1B-style schedules interleave forwards too, all but the warm-up forwards
//! before the first backward.
double Zero2Backlog(const Plan& plan, const PlanCosts& pc, const RankCost& rc, const RankWork& w, int64_t trailing) {
  const Layout& l = plan.layout;
  const double m = static_cast<double>(pc.microbatches);
  double layers = 0, outer_work = 0;
  for (const ChunkCost& cc : rc.chunks) {
    layers += static_cast<double>(cc.units());
    if (cc.embedding || cc.head) outer_work += rc.dp.grad_outer_s;
  }
  const double work = m * (layers * rc.dp.grad_layer_s + outer_work);
  const double fr = w.fwd_s / static_cast<double>(l.virtual_stages);
  const double warmup = static_cast<double>(std::min(trailing, pc.microbatches * l.virtual_stages));
  const double window = l.schedule == ScheduleKind::kGpipe ? m * w.bwd_s : m * (w.fwd_s + w.bwd_s) - warmup * fr;
  return work - window;
}

//! Pipeline rank r's DP tail after its last backward: its exposed gradient collectives, the fold of
//! the last reduce-scatter (ZeRO-2/3) and the tied-embedding all-reduce.
double RankDpTail(const Plan& plan, const PlanCosts& pc, const std::vector<RankWork>& work, int64_t r) {
  const Layout& l = plan.layout;
  const RankCost& rc = pc.ranks[static_cast<size_t>(r)];
  const RankWork& w = work[static_cast<size_t>(r)];
  double tail = 0;
  if (DenseReductionRanks(l) > 1 && pc.dp_after_backward) {
    tail = rc.GradReductionAfterBackward();
  } else if (DenseReductionRanks(l) > 1 && l.zero_stage <= 2) {
    const int64_t trailing = TrailingBackwards(l, r, pc.microbatches);
    double dp_end = BucketReleaseEnd(plan, pc, rc, w.bwd_s / static_cast<double>(l.virtual_stages), trailing);
    if (l.zero_stage == 2) dp_end = std::max(dp_end, Zero2Backlog(plan, pc, rc, w, trailing));
    tail = std::max(0.0, dp_end);
  }
  // ZeRO-2/3: the last reduce-scatter is folded into the shard once it has arrived.
  tail += rc.final_fold_s;
  if (rc.dp.tied_embedding_s > 0) tail += rc.dp.tied_embedding_s;
  return tail;
}

}  // namespace

double DpTailEnd(const Plan& plan, const PlanCosts& pc, const std::vector<RankWork>& work, double pipe_s) {
  const int64_t p = plan.layout.pp;
  const double v = static_cast<double>(plan.layout.virtual_stages);
  // Rank r finishes its last backward earlier than rank 0 by the backward pass of the ranks before
  // it; its sequence-parallel coalesced all-reduce and its DP tail run from there.
  double end = pipe_s, before = 0;
  for (int64_t r = 0; r < p; ++r) {
    const RankCost& rc = pc.ranks[static_cast<size_t>(r)];
    end = std::max(end, pipe_s - before + rc.sp_grad_coalesced_s + RankDpTail(plan, pc, work, r));
    if (r + 1 < p) before += work[static_cast<size_t>(r)].bwd_s / v + Hop(pc, r);
  }
  return end;
}

double StepEnd(const PlanCosts& pc, double tail_end_s) {
  double step = 0;
  for (const RankCost& rc : pc.ranks) {
    const double gather = rc.dp.gather_overlapped ? 0.0 : rc.dp.gather_after_s;
    step = std::max(step, tail_end_s + pc.grad_norm_s + pc.clip_sync_s + rc.optimizer_s + gather);
  }
  return step;
}

}  // namespace parallax::planner
