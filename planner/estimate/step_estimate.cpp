#include "planner/estimate/step_estimate.h"

#include <algorithm>
#include <vector>

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
double Zero3Extra(int64_t n, double a, double r, double x, double x_c, double k, double queued, double lead,
                  bool prefetch, double d) {
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
  return std::max(0.0, queued + a - lead) + (nn - 1) * std::max(busy, xk) + x - nn * x;
}

//! Per-group buckets (our executor): the outer groups of a chunk, as the simulator walks them.
struct OuterGroups {
  double embedding_gathers = 0;  //!< ZeRO-3 gathers before the embedding's pass
  double head_gathers = 0;       //!< before the head's
  double chain = 0;              //!< gradient collectives but the last: the compute waits for each
  double last = 0;               //!< the last one, left in flight
  bool any = false;
};

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

}  // namespace

StepTime EstimateStepTime(const Plan& plan, const PlanCosts& pc) {
  const Layout& l = plan.layout;
  const int64_t p = l.pp;
  const int64_t v = l.virtual_stages;
  const double m = static_cast<double>(pc.microbatches);
  const UnitCosts& u = *pc.units;
  const bool dp = l.dp > 1;
  const bool prefetch = plan.implementation.zero3_prefetch_layers.value > 0;  // ZeRO-3 gathers one layer ahead
  const double k = pc.contention;

  // Per-rank work of one micro-batch, with ZeRO-3 stalls and DP contention folded in.
  std::vector<double> F(static_cast<size_t>(p)), B(static_cast<size_t>(p)), zero3_wait(static_cast<size_t>(p), 0.0);
  std::vector<double> contention_extra(static_cast<size_t>(p), 0.0);
  // The ZeRO-3 part of F/B that only follows an earlier pass on the same rank (a first gather
  // queued behind that pass's last reduce-scatter): absent from the first pass of the fill.
  std::vector<double> F_queue(static_cast<size_t>(p), 0.0), B_queue(static_cast<size_t>(p), 0.0);
  for (int64_t r = 0; r < p; ++r) {
    const RankCost& rc = pc.ranks[static_cast<size_t>(r)];
    double f = rc.fwd_s, b = rc.bwd_s;
    if (dp && l.zero_stage == 3) {
      for (const ChunkCost& cc : rc.chunks) {
        const int64_t n = cc.layers.count;
        const double a = rc.dp.gather_layer_s, red = rc.dp.grad_layer_s;
        // 1F1B-style schedules run a forward right after a backward: its first gather queues behind
        // that backward's last reduce-scatter; GPipe does so for backward after backward.
        const bool gpipe = l.schedule == ScheduleKind::kGpipe;
        // The chunk holding the embedding or the head also reduce-scatters their gradients after
        // its backward, behind the last layer's; the embedding's backward runs meanwhile.
        const double emb_bwd = cc.embedding ? u.embedding.bwd_s : 0.0;
        const bool pg = rc.dp.per_group;
        const OuterGroups og = OuterOf(rc.dp, cc);
        // Per-group buckets: the compute waits for the last layer's reduce-scatter (the outer
        // gathers queue behind it, or the first outer reduce-scatter waits for it), then for each
        // outer one but the last, which is what the next pass finds queued. The outer gathers are
        // exposed, and so is the first layer's (issued after the unit that precedes it).
        const double queued =
            pg ? (og.any ? og.last : (n > 0 ? red : 0.0))
               : (n > 0 ? std::max(0.0, red - emb_bwd) + (cc.embedding || cc.head ? rc.dp.grad_outer_s : 0.0) : 0.0);
        const double fwd_outer = pg ? og.embedding_gathers + og.head_gathers : 0.0;
        const double bwd_outer =
            pg ? og.head_gathers + (og.any ? (n > 0 ? red : 0.0) + og.embedding_gathers + og.chain : 0.0) : 0.0;
        // A layer's pass includes its ZeRO memory passes (plan_costs.h ZeroPasses; not slowed by
        // contention in the simulator).
        auto zf = [&](double q) {
          return Zero3Extra(n, a, 0, u.layer.fwd_s + rc.dp.layer_fwd_pass_s(), u.layer.fwd_s - u.layer.fwd_tp_s, k, q,
                            cc.embedding && !pg ? u.embedding.fwd_s : 0.0, prefetch, rc.dp.gather_demand_layer_s) +
                 fwd_outer;
        };
        auto zb = [&](double q) {
          return Zero3Extra(n, a, red, u.layer.bwd_s + rc.dp.layer_bwd_pass_s(), u.layer.bwd_s - u.layer.bwd_tp_s, k, q,
                            cc.head && !pg ? u.head.bwd_s : 0.0, prefetch, rc.dp.gather_demand_layer_s) +
                 bwd_outer;
        };
        const double zfwd = zf(gpipe ? 0 : queued), zbwd = zb(gpipe ? queued : 0);
        zero3_wait[static_cast<size_t>(r)] += zfwd + zbwd;
        if (gpipe) {
          B_queue[static_cast<size_t>(r)] += zbwd - zb(0);
        } else {
          F_queue[static_cast<size_t>(r)] += zfwd - zf(0);
        }
        f += zfwd;
        b += zbwd;
      }
    } else if (dp && l.zero_stage == 2) {
      // Every micro-batch's backward reduce-scatters its layers' gradients on the DP stream.
      double layers = 0;
      for (const ChunkCost& cc : rc.chunks) layers += static_cast<double>(cc.layers.count);
      const double dp_work = layers * rc.dp.grad_layer_s;
      const double cb = (k - 1) * std::min(dp_work, rc.bwd_s - rc.bwd_tp_s);
      b += cb;
      contention_extra[static_cast<size_t>(r)] += cb;
      if (rc.dp.per_group) {
        // One reduce-scatter in flight: a layer's waits for the previous layer's, the first outer
        // one for the last layer's (the embedding's backward runs between), each later outer one
        // for the one before it.
        double wait = 0;
        const double R = rc.dp.grad_layer_s;
        // A layer's backward as it runs beside the busy DP stream (contention included above).
        const double x = u.layer.bwd_s + rc.dp.layer_bwd_pass_s() + (k - 1) * (u.layer.bwd_s - u.layer.bwd_tp_s);
        for (const ChunkCost& cc : rc.chunks) {
          const double n = static_cast<double>(cc.layers.count);
          if (n > 1) wait += (n - 1) * std::max(0.0, R - x);
          const OuterGroups og = OuterOf(rc.dp, cc);
          if (og.any) {
            wait += (n > 0 ? std::max(0.0, R - (cc.embedding ? u.embedding.bwd_s : 0.0)) : 0.0) + og.chain;
            // The last outer one is still in flight when the next backward of the chunk issues its
            // first layer's (m - 1 times in m): after a head backward and a layer's, and under
            // 1F1B-style schedules a forward pass of the chunk too.
            const double gap = (l.schedule == ScheduleKind::kGpipe ? 0.0 : cc.fwd_s) + (cc.head ? u.head.bwd_s : 0.0) +
                               u.layer.bwd_s + rc.dp.layer_bwd_pass_s();
            if (n > 0) wait += std::max(0.0, og.last - gap) * (m - 1) / m;
          }
        }
        b += wait;
        zero3_wait[static_cast<size_t>(r)] += wait;
      }
      // A backlog that outgrows a micro-batch's compute stretches the step (handled at the end).
    }
    if (pc.blocking_p2p && p > 1) {
      // A blocking send holds the sender for the transfer of each chunk pass it sends on.
      for (const ChunkCost& cc : rc.chunks) {
        if (cc.stage + 1 < p * v) f += pc.boundary_p2p_s[static_cast<size_t>(cc.stage)];
        if (cc.stage > 0) b += pc.boundary_p2p_s[static_cast<size_t>(cc.stage - 1)];
      }
    }
    F[static_cast<size_t>(r)] = f;
    B[static_cast<size_t>(r)] = b;
  }
  double sumF = 0, sumB = 0, maxF = 0, maxB = 0, maxW = 0;
  for (int64_t r = 0; r < p; ++r) {
    sumF += F[static_cast<size_t>(r)] - F_queue[static_cast<size_t>(r)];
    sumB += B[static_cast<size_t>(r)] - B_queue[static_cast<size_t>(r)];
    maxF = std::max(maxF, F[static_cast<size_t>(r)]);
    maxB = std::max(maxB, B[static_cast<size_t>(r)]);
    maxW = std::max(maxW, F[static_cast<size_t>(r)] + B[static_cast<size_t>(r)]);
  }
  // Pipeline transfers, each at its own boundary's cost: hop r joins pipeline ranks r and
  // (r + 1) % p (model-stage boundary s uses hop s % p). The fill and the drain cross hops
  // 0 .. p-2 once each (`chain`); interleaved chunks also cross the wrap p-1 -> 0 (`ring`: all p).
  auto hop = [&](int64_t r) { return pc.boundary_p2p_s.empty() ? 0.0 : pc.boundary_p2p_s[static_cast<size_t>(r)]; };
  double chain = 0, max_hop = 0;
  for (int64_t r = 0; r + 1 < p; ++r) {
    chain += hop(r);
    max_hop = std::max(max_hop, hop(r));
  }
  const double ring = chain + (v > 1 ? hop(p - 1) : 0.0);
  // Steady-state period of one pass (micro-batch, or chunk pass when divided by v): the largest of
  // each rank's work, each link's send, and the mean of each loop that a send and its reply close
  // between ranks r and r+1 (both ranks' work plus two transfers over `lag` passes: the max-plus
  // cycle mean, Baccelli et al. 1992, "Synchronization and Linearity").
  auto period = [&](double div, double lag, int64_t hops) {
    double t = maxW / div;
    for (int64_t r = 0; r < hops; ++r) {
      const size_t a = static_cast<size_t>(r), b = static_cast<size_t>((r + 1) % p);
      t = std::max({t, hop(r), ((F[a] + B[a] + F[b] + B[b]) / div + 2 * hop(r)) / lag});
    }
    return t;
  };
  double pipe = 0, comm_fill = 2 * chain;
  double steady_comm = 0;  // p2p the steady state does not hide, whole step
  if (l.schedule == ScheduleKind::kGpipe) {
    // Two flow shops (forwards, then backwards) of m jobs over ranks and links.
    const double fwd = std::max(maxF, max_hop), bwd = std::max(maxB, max_hop);
    pipe = sumF + sumB + (m - 1) * (fwd + bwd) + comm_fill;
    steady_comm = (m - 1) * (fwd - maxF + bwd - maxB);
  } else if (v == 1) {
    // 1F1B: rank r's backward of micro-batch j is followed by its forward of j + p - r, and rank
    // r+1's forward of that one by its backward of j + 2: the loop spans 2 micro-batches.
    // Interleaved with v = 1 warms up twice as deep (2(p - r - 1) forwards): 3.
    const double cycle = period(1.0, l.schedule == ScheduleKind::kOneFOneB ? 2.0 : 3.0, p - 1);
    pipe = sumF + sumB + (m - 1) * cycle + comm_fill;
    steady_comm = (m - 1) * (cycle - maxW);
  } else {
    // Interleaved (Narayanan et al. SC'21 section 2.2.2): m v chunk passes per rank; warm-ups differ
    // by 2 between neighbours, so a loop spans 3 passes, the wrap p-1 -> 0 included. Each of the
    // v-1 chunk changes in rank p-1's warm-up and in rank 0's cool-down waits for a micro-batch to
    // go round the ring: p chunk passes plus all p transfers against the rank's own p passes.
    const double vv = static_cast<double>(v);
    const double cycle = period(vv, 3.0, p);
    comm_fill += 2 * (vv - 1) * ring;
    pipe = m * vv * cycle + (sumF + sumB - maxW) / vv + comm_fill;
    steady_comm = m * (vv * cycle - maxW);
  }

  // The step starts with the gradient zero-fill; the first stage's delays the whole pipeline.
  pipe += pc.ranks[0].grad_zero_step_s;
  // ZeRO-1/2 with overlap_param_gather: the previous step's parameter gather runs on the DP
  // stream from the step's start, and each chunk's first forward waits for its units' parameters
  // (GatherReady). Rank r's first forward of chunk c starts after the fill reaches it and, in the
  // interleaved warm-up, c p chunk forwards of its own; the pipeline ends later by the largest
  // wait of any rank, or by the contention slowdown of the compute the gather overlaps.
  double gather_delay = 0;
  if (dp) {  // gather_overlapped: ZeRO-1/2 only
    double delay = 0, lead = pc.ranks[0].grad_zero_step_s;
    for (int64_t r = 0; r < p; ++r) {
      const RankCost& rc = pc.ranks[static_cast<size_t>(r)];
      if (rc.dp.gather_overlapped && rc.dp.gather_after_s > 0) {
        const std::vector<ChunkGatherReady> ready = GatherReady(rc);
        const double fc = F[static_cast<size_t>(r)] / static_cast<double>(v);
        const double x = u.layer.fwd_s + rc.dp.layer_fwd_pass_s();
        double wait = 0, last = 0;
        for (size_t c = 0; c < ready.size(); ++c) {
          const ChunkCost& cc = rc.chunks[c];
          const ChunkGatherReady& g = ready[c];
          const double start = lead + static_cast<double>(c * static_cast<size_t>(p)) * fc;
          const double emb = cc.embedding ? u.embedding.fwd_s : 0.0;
          const double n = static_cast<double>(cc.layers.count);
          // Needs and arrivals both grow linearly over the layers: the first and last bind.
          wait = std::max(wait, g.embedding - start);
          if (n > 0) {
            wait = std::max({wait, g.layers + g.per_layer - (start + emb), g.layers + n * g.per_layer - (start + emb + (n - 1) * x)});
          }
          if (cc.head) wait = std::max(wait, g.head - (start + emb + n * x));
          last = std::max(last, g.head);
        }
        const double slowed = (k - 1) / k * std::max(0.0, last - lead);
        delay = std::max(delay, std::max(wait, slowed));
      }
      lead += F[static_cast<size_t>(r)] / static_cast<double>(v) + (r + 1 < p ? hop(r) : 0.0);
    }
    pipe += delay;
    gather_delay = delay;
  }
  // Sequence parallelism per parameter under ZeRO 0/1: each rank's last backward waits for its
  // gradient all-reduces, and the cool-down passes that delay down to rank 0.
  for (const RankCost& rc : pc.ranks) pipe += rc.sp_grad_last_s;

  // After the pipeline: rank r finishes its last backward earlier than rank 0 by the backward
  // pass of the ranks before it; its DP tail and the tied-embedding all-reduce run from there.
  double barrier = pipe;
  double tail0 = 0;
  for (int64_t r = 0; r < p; ++r) {
    const RankCost& rc = pc.ranks[static_cast<size_t>(r)];
    double before = 0;
    for (int64_t q = 0; q < r; ++q) before += B[static_cast<size_t>(q)] / static_cast<double>(v) + hop(q);
    const double end = pipe - before;
    double tail = 0;
    if (dp && pc.dp_after_backward) {
      int64_t layers = 0;
      bool outer = false;
      for (const ChunkCost& cc : rc.chunks) {
        layers += cc.layers.count;
        outer = outer || cc.embedding || cc.head;
      }
      tail = static_cast<double>(layers) * rc.dp.grad_layer_s + (outer ? rc.dp.grad_outer_s : 0.0);
    } else if (dp && l.zero_stage <= 2) {
      // The DP stream as one machine fed by bucket releases (layer buckets as each layer's
      // backward ends, the embedding/head bucket at its chunk's end); it ends at max over buckets j
      // of (release_j + the work released from j on). Releases come from the rank's trailing run of
      // consecutive backward passes: pass j from the end (j = 0 last) ends j chunk backwards before
      // the last and belongs to chunk (j / pp) % v (Megatron's interleaved cool-down runs chunks
      // v-1 .. 0, pp micro-batches each; model/schedule.cpp). ZeRO-0/1 reduce after each chunk's
      // last pass (j = c pp); ZeRO-2 after every pass.
      const double R = rc.dp.grad_layer_s;
      const double beta = u.layer.bwd_s;
      const double chunk_bwd = B[static_cast<size_t>(r)] / static_cast<double>(v);
      const int64_t mb = pc.microbatches;
      int64_t trailing = 1;  // consecutive backward passes that end the rank's order
      if (l.schedule == ScheduleKind::kGpipe) {
        trailing = mb;
      } else if (v == 1) {
        trailing = std::min(p - r - 1, mb) + 1;
      } else {
        trailing = mb == p ? mb * v : std::min((p - r - 1) * 2 + (v - 1) * p + 1, mb * v);
      }
      if (l.zero_stage <= 1) trailing = std::min(trailing, (v - 1) * p + 1);
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
        const double n = static_cast<double>(cc.layers.count);
        if (n > 0) {
          const double layers_end = pass_end - (cc.embedding ? u.embedding.bwd_s : 0.0);
          dp_end = std::max({dp_end, layers_end + R + suffix, layers_end - (n - 1) * beta + n * R + suffix});
        }
        suffix += n * R;
      }
      double layers = 0, outer_work = 0;
      for (const ChunkCost& cc : rc.chunks) {
        layers += static_cast<double>(cc.layers.count);
        if (cc.embedding || cc.head) outer_work += rc.dp.grad_outer_s;
      }
      if (l.zero_stage == 2) {
        // Backlog of all micro-batches' reduce-scatters beyond the compute that hides them.
        const double work = m * (layers * R + outer_work);
        // The reduce-scatters start with the first backward: under GPipe all forwards come first,
        // so only the backward phase hides them; 1F1B-style schedules interleave forwards too, all
        // but the warm-up forwards before the first backward.
        const double fr = F[static_cast<size_t>(r)] / static_cast<double>(v);
        const double warmup = static_cast<double>(std::min(trailing, mb * v));
        const double window = l.schedule == ScheduleKind::kGpipe
                                  ? m * B[static_cast<size_t>(r)]
                                  : m * (F[static_cast<size_t>(r)] + B[static_cast<size_t>(r)]) - warmup * fr;
        dp_end = std::max(dp_end, work - window);
      }
      tail = std::max(0.0, dp_end);
    }
    // ZeRO-2/3: the last reduce-scatter is folded into the shard once it has arrived.
    tail += rc.final_fold_s;
    if (rc.dp.tied_embedding_s > 0) tail += rc.dp.tied_embedding_s;
    if (r == 0) tail0 = tail;
    barrier = std::max(barrier, end + rc.sp_grad_coalesced_s + tail);
  }
  double step = 0;
  for (int64_t r = 0; r < p; ++r) {
    const RankCost& rc = pc.ranks[static_cast<size_t>(r)];
    const double gather = rc.dp.gather_overlapped ? 0.0 : rc.dp.gather_after_s;
    step = std::max(step, barrier + pc.grad_norm_s + pc.clip_sync_s + rc.optimizer_s + gather);
  }
  (void)tail0;

  const RankCost& r0 = pc.ranks[0];
  Breakdown b;
  b.tp_comm_s = m * (r0.fwd_tp_s + r0.bwd_tp_s) + r0.sp_grad_last_s + r0.sp_grad_coalesced_s;
  b.compute_s = m * (r0.fwd_s + r0.bwd_s - r0.fwd_tp_s - r0.bwd_tp_s + contention_extra[0]) + r0.grad_norm_s +
                r0.optimizer_s;
  b.dp_comm_s = step - pipe - r0.grad_norm_s - r0.optimizer_s + m * zero3_wait[0] + gather_delay;
  b.pp_comm_s = p > 1 ? comm_fill + steady_comm : 0;
  b.bubble_s = std::max(0.0, step - b.compute_s - b.tp_comm_s - b.dp_comm_s - b.pp_comm_s);
  return {step, b};
}

Result<Prediction> Estimate(const Plan& plan, const CostDb* db) {
  if (Status st = ValidateLayout(plan.layout, plan.model, plan.cluster); !st) return st.error();
  CostContext ctx(plan.cluster, plan.training.precision, db, &plan.implementation);
  const PlanCosts pc = CostPlan(ctx, plan);
  const StepTime st = EstimateStepTime(plan, pc);
  return FinishPrediction(plan, st.step_time_s, st.breakdown);
}

}  // namespace parallax::planner
