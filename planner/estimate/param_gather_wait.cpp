// Parameter-gather waits: ZeRO-3's gathers before every pass (with the reduce-scatters sharing the
// DP stream), and ZeRO-1/2's overlapped gather under the next step's first forwards.

#include <algorithm>
#include <vector>

#include "planner/estimate/step_phases.h"
#include "model/rank_groups.h"

namespace parallax::planner {
namespace {

//! ZeRO-3 pass over n layers of x seconds each (x_c of it compute): layer i+1's gather (a, plus
//! the reduce-scatter r sharing the DP stream in backward) is issued when layer i starts, so the
//! first gather is exposed and each later layer takes max(a + r, x slowed by contention k while
//! the DP stream is busy). Returns the extra time over n * x.
//! `queued`: DP work still ahead of the first gather (the previous pass's last reduce-scatters).
//! `lead`: compute the pass runs before its first layer (the head's backward, the embedding's
//! forward), which hides that much of the first gather and the queue.
//! `prefetch` false (zero3_prefetch_layers 0): layer i's gather is issued when the layer is reached,
//! behind the previous layer's reduce-scatter, and the compute waits for both every layer.
//! `d` (> 0 under a prefetch budget smaller than a layer, zero3_prefetch_params): the rest of each
//! layer, gathered when the layer is reached; it queues behind the previous layer's reduce-scatter
//! on the one DP stream, so each later layer waits r + d, and the compute overlaps only the
//! prefetched part a of the next layer.
//! `one_in_flight` (per-group buckets, kReduceScattersInFlight): layer i+1's gather is issued when
//! layer i starts, ahead of layer i's reduce-scatter (issued at its end), so it queues behind layer
//! i-1's only: layer 1 waits for its gather alone, and the pass ends when its last layer's compute
//! and layer n-2's reduce-scatter (which the last one waits for before it is issued) are both done.
double Zero3Extra(int64_t n, double a, double r, double x, double x_c, double k, double queued, double lead,
                  bool prefetch, double d, bool one_in_flight) {
  if (n <= 0) return 0;
  if (!prefetch) return std::max(0.0, queued + a - lead) + static_cast<double>(n - 1) * (a + r);
  if (d > 0) {
    const double xk = x + (k - 1) * std::min(x_c, a / k);
    const double nn = static_cast<double>(n);
    return std::max(0.0, queued + a - lead) + d + (nn - 1) * (std::max(a, xk) + r + d) + x - nn * x;
  }
  const double busy = a + r;
  const double xk = x + (k - 1) * std::min(x_c, busy / k);
  const double nn = static_cast<double>(n);
  if (one_in_flight && r > 0 && n >= 2) {
    const double first = std::max(a, x + (k - 1) * std::min(x_c, a / k));
    const double last = std::max(r, x + (k - 1) * std::min(x_c, r / k));
    return std::max(0.0, queued + a - lead) + first + (nn - 2) * std::max(busy, xk) + last - nn * x;
  }
  return std::max(0.0, queued + a - lead) + (nn - 1) * std::max(busy, xk) + x - nn * x;
}

//! One ZeRO-3 pass (forward or backward) of a chunk: Zero3Extra's arguments but the queue, plus
//! the exposed gathers of the outer groups the pass uses.
struct Zero3Pass {
  int64_t layers = 0;
  double gather_s = 0, reduce_s = 0, layer_s = 0, layer_compute_s = 0, contention = 1, lead_s = 0;
  bool prefetch = true;
  bool one_in_flight = false;  //!< per-group buckets: one reduce-scatter in flight (Zero3Extra)
  double demand_s = 0, outer_s = 0;

  //! The pass's extra time with `queued_s` of DP work ahead of its first gather.
  double Extra(double queued_s) const {
    return Zero3Extra(layers, gather_s, reduce_s, layer_s, layer_compute_s, contention, queued_s, lead_s, prefetch,
                      demand_s, one_in_flight) +
           outer_s;
  }
};

//! Rank `rc`'s latest wait, over its chunks' first forwards, for the overlapped gather (or the
//! slowdown of the compute it overlaps): `lead_s` is when the rank's first forward starts, `fc`
//! one chunk forward.
double RankGatherWait(const Plan& plan, const PlanCosts& pc, const RankCost& rc, double fc, double lead_s) {
  const UnitCosts& u = *pc.units;
  const double k = pc.contention;
  const size_t p = static_cast<size_t>(plan.layout.pp);
  const std::vector<ChunkGatherReady> ready = GatherReady(rc);
  const double x = rc.layer.fwd_s + rc.dp.layer_fwd_pass_s();
  double wait = 0, last = 0;
  for (size_t c = 0; c < ready.size(); ++c) {
    const ChunkCost& cc = rc.chunks[c];
    const ChunkGatherReady& g = ready[c];
    // Rank r's first forward of chunk c starts after the fill reaches it and, in the interleaved
    // warm-up, c p chunk forwards of its own.
    const double start = lead_s + static_cast<double>(c * p) * fc;
    const double emb = cc.embedding ? u.embedding.fwd_s : 0.0;
    const double n = static_cast<double>(cc.units());
    // Needs and arrivals both grow linearly over the layers: the first and last bind.
    wait = std::max(wait, g.embedding - start);
    if (n > 0) {
      wait = std::max({wait, g.layers + g.per_layer - (start + emb), g.layers + n * g.per_layer - (start + emb + (n - 1) * x)});
    }
    if (cc.head) wait = std::max(wait, g.head - (start + emb + n * x));
    last = std::max(last, g.head);
  }
  const double slowed = (k - 1) / k * std::max(0.0, last - lead_s);
  return std::max(wait, slowed);
}

}  // namespace

void AddZero3Waits(const Plan& plan, const PlanCosts& pc, const RankCost& rc, RankWork& work) {
  const UnitCosts& u = *pc.units;
  // 1F1B-style schedules run a forward right after a backward: its first gather queues behind
  // that backward's last reduce-scatter; GPipe does so for backward after backward.
  const bool gpipe = plan.layout.schedule == ScheduleKind::kGpipe;
  const bool pg = rc.dp.per_group;
  const double a = rc.dp.gather_layer_s, red = rc.dp.grad_layer_s;
  for (const ChunkCost& cc : rc.chunks) {
    const int64_t n = cc.units();
    // The chunk holding the embedding or the head also reduce-scatters their gradients after
    // its backward, behind the last layer's; the embedding's backward runs meanwhile.
    const double emb_bwd = cc.embedding ? u.embedding.bwd_s : 0.0;
    const OuterGroups og = OuterOf(rc.dp, cc);
    // Per-group buckets: the compute waits for the last layer's reduce-scatter (the outer
    // gathers queue behind it, or the first outer reduce-scatter waits for it), then for each
    // outer one but the last, which is what the next pass finds queued. The outer gathers are
    // exposed, and so is the first layer's (issued after the unit that precedes it).
    const double queued =
        pg ? (og.any ? og.last : (n > 0 ? red : 0.0))
           : (n > 0 ? std::max(0.0, red - emb_bwd) + (cc.embedding || cc.head ? rc.dp.grad_outer_s : 0.0) : 0.0);
    // A layer's pass includes its ZeRO memory passes (plan_costs.h ZeroPasses; not slowed by
    // contention in the simulator).
    const Zero3Pass fwd{.layers = n,
                        .gather_s = a,
                        .reduce_s = 0,
                        .layer_s = rc.layer.fwd_s + rc.dp.layer_fwd_pass_s(),
                        .layer_compute_s = rc.layer.fwd_s - rc.layer.fwd_tp_s,
                        .contention = pc.contention,
                        .lead_s = cc.embedding && !pg ? u.embedding.fwd_s : 0.0,
                        .prefetch = plan.implementation.zero3_prefetch_layers.value > 0,
                        .one_in_flight = pg,
                        .demand_s = rc.dp.gather_demand_layer_s,
                        .outer_s = pg ? og.embedding_gathers + og.head_gathers : 0.0};
    Zero3Pass bwd = fwd;
    bwd.reduce_s = red;
    bwd.layer_s = rc.layer.bwd_s + rc.dp.layer_bwd_pass_s();
    bwd.layer_compute_s = rc.layer.bwd_s - rc.layer.bwd_tp_s;
    bwd.lead_s = cc.head && !pg ? u.head.bwd_s : 0.0;
    bwd.outer_s = pg ? og.head_gathers + (og.any ? (n > 0 ? red : 0.0) + og.embedding_gathers + og.chain : 0.0) : 0.0;
    const double zfwd = fwd.Extra(gpipe ? 0 : queued), zbwd = bwd.Extra(gpipe ? queued : 0);
    work.dp_wait_s += zfwd + zbwd;
    if (gpipe) {
      work.bwd_queue_s += zbwd - bwd.Extra(0);
    } else {
      work.fwd_queue_s += zfwd - fwd.Extra(0);
    }
    work.fwd_s += zfwd;
    work.bwd_s += zbwd;
  }
}

double OverlappedGatherDelay(const Plan& plan, const PlanCosts& pc, const std::vector<RankWork>& work) {
  if (DenseReductionRanks(plan.layout) <= 1) return 0;  // gather_overlapped: ZeRO-1/2 with dp x cp > 1 only
  const int64_t p = plan.layout.pp;
  const double v = static_cast<double>(plan.layout.virtual_stages);
  // The gather runs on the DP stream from the step's start, after the gradient zero-fill.
  double delay = 0, lead = pc.ranks[0].grad_zero_step_s;
  for (int64_t r = 0; r < p; ++r) {
    const RankCost& rc = pc.ranks[static_cast<size_t>(r)];
    const double fc = work[static_cast<size_t>(r)].fwd_s / v;
    if (rc.dp.gather_overlapped && rc.dp.gather_after_s > 0) delay = std::max(delay, RankGatherWait(plan, pc, rc, fc, lead));
    lead += fc + (r + 1 < p ? Hop(pc, r) : 0.0);
  }
  return delay;
}

}  // namespace parallax::planner
