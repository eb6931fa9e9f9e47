// The pipeline: its fill and drain, and the steady period of each schedule (formulas in
// step_estimate.h).

#include <algorithm>
#include <vector>

#include "planner/estimate/step_phases.h"

namespace parallax::planner {
namespace {

//! What filling and draining the pipeline once costs: the ranks' work and the transfers.
struct FillDrain {
  //! Sums over ranks of one micro-batch's forward / backward, less the queue a first pass lacks.
  double sum_fwd_s = 0, sum_bwd_s = 0;
  double max_fwd_s = 0, max_bwd_s = 0, max_work_s = 0;  //!< over ranks, queues included
  //! Hop r joins pipeline ranks r and (r + 1) % p (model-stage boundary s uses hop s % p). The fill
  //! and the drain cross hops 0 .. p-2 once each (`chain`); interleaved chunks also cross the wrap
  //! p-1 -> 0 (`ring`: all p).
  double chain_s = 0, max_hop_s = 0, ring_s = 0;
};

FillDrain FillDrainOf(const Plan& plan, const PlanCosts& pc, const std::vector<RankWork>& work) {
  const int64_t p = plan.layout.pp;
  FillDrain fd;
  for (const RankWork& w : work) {
    fd.sum_fwd_s += w.fwd_s - w.fwd_queue_s;
    fd.sum_bwd_s += w.bwd_s - w.bwd_queue_s;
    fd.max_fwd_s = std::max(fd.max_fwd_s, w.fwd_s);
    fd.max_bwd_s = std::max(fd.max_bwd_s, w.bwd_s);
    fd.max_work_s = std::max(fd.max_work_s, w.fwd_s + w.bwd_s);
  }
  for (int64_t r = 0; r + 1 < p; ++r) {
    fd.chain_s += Hop(pc, r);
    fd.max_hop_s = std::max(fd.max_hop_s, Hop(pc, r));
  }
  fd.ring_s = fd.chain_s + (plan.layout.virtual_stages > 1 ? Hop(pc, p - 1) : 0.0);
  return fd;
}

//! Steady-state period of one pass (micro-batch, or chunk pass when divided by `div` = v): the
//! largest of each rank's work, each link's send, and the mean of each loop that a send and its
//! reply close between ranks r and r+1 over hops 0 .. `hops`-1 (both ranks' work plus two transfers
//! over `lag` passes: the max-plus cycle mean, Baccelli et al. 1992, "Synchronization and Linearity").
double SteadyPeriod(const PlanCosts& pc, const std::vector<RankWork>& work, double max_work_s, double div,
                    double lag, int64_t hops) {
  const size_t p = work.size();
  double t = max_work_s / div;
  for (int64_t r = 0; r < hops; ++r) {
    const RankWork& a = work[static_cast<size_t>(r)];
    const RankWork& b = work[(static_cast<size_t>(r) + 1) % p];
    t = std::max({t, Hop(pc, r), ((a.fwd_s + a.bwd_s + b.fwd_s + b.bwd_s) / div + 2 * Hop(pc, r)) / lag});
  }
  return t;
}

}  // namespace

double Hop(const PlanCosts& pc, int64_t r) {
  return pc.boundary_p2p_s.empty() ? 0.0 : pc.boundary_p2p_s[static_cast<size_t>(r)];
}

PipelineTime PipelineMakespan(const Plan& plan, const PlanCosts& pc, const std::vector<RankWork>& work) {
  const Layout& l = plan.layout;
  const double m = static_cast<double>(pc.microbatches);
  const FillDrain fd = FillDrainOf(plan, pc, work);
  PipelineTime pt;
  pt.comm_fill_s = 2 * fd.chain_s;
  if (l.schedule == ScheduleKind::kGpipe) {
    // Two flow shops (forwards, then backwards) of m jobs over ranks and links.
    const double fwd = std::max(fd.max_fwd_s, fd.max_hop_s), bwd = std::max(fd.max_bwd_s, fd.max_hop_s);
    pt.pipe_s = fd.sum_fwd_s + fd.sum_bwd_s + (m - 1) * (fwd + bwd) + pt.comm_fill_s;
    pt.steady_comm_s = (m - 1) * (fwd - fd.max_fwd_s + bwd - fd.max_bwd_s);
  } else if (l.virtual_stages == 1) {
    // 1F1B: rank r's backward of micro-batch j is followed by its forward of j + p - r, and rank
    // r+1's forward of that one by its backward of j + 2: the loop spans 2 micro-batches.
    // Interleaved with v = 1 warms up twice as deep (2(p - r - 1) forwards): 3.
    const double lag = l.schedule == ScheduleKind::kOneFOneB ? 2.0 : 3.0;
    const double cycle = SteadyPeriod(pc, work, fd.max_work_s, 1.0, lag, l.pp - 1);
    pt.pipe_s = fd.sum_fwd_s + fd.sum_bwd_s + (m - 1) * cycle + pt.comm_fill_s;
    pt.steady_comm_s = (m - 1) * (cycle - fd.max_work_s);
  } else {
    // Interleaved (Narayanan et al. SC'21 section 2.2.2): m v chunk passes per rank; warm-ups differ
    // by 2 between neighbours, so a loop spans 3 passes, the wrap p-1 -> 0 included. Each of the
    // v-1 chunk changes in rank p-1's warm-up and in rank 0's cool-down waits for a micro-batch to
    // go round the ring: p chunk passes plus all p transfers against the rank's own p passes.
    const double vv = static_cast<double>(l.virtual_stages);
    const double cycle = SteadyPeriod(pc, work, fd.max_work_s, vv, 3.0, l.pp);
    pt.comm_fill_s += 2 * (vv - 1) * fd.ring_s;
    pt.pipe_s = m * vv * cycle + (fd.sum_fwd_s + fd.sum_bwd_s - fd.max_work_s) / vv + pt.comm_fill_s;
    pt.steady_comm_s = m * (vv * cycle - fd.max_work_s);
  }
  return pt;
}

}  // namespace parallax::planner
