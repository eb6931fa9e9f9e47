#include "planner/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/param_groups.h"
#include "model/schedule.h"
#include "planner/cost/placement.h"
#include "planner/cost/plan_costs.h"
#include "planner/sim/trace_recorder.h"
#include "model/rank_groups.h"

namespace parallax::planner {
namespace {

struct RankState {
  std::vector<PipeOp> order;
  std::vector<size_t> last_bwd;  // per chunk: position of its last backward in `order`
  size_t next = 0;
  double t = 0;             // compute stream free
  double dp_free = 0;       // DP stream free
  double send_fwd_free = 0, send_bwd_free = 0;
  double compute_s = 0, tp_s = 0, pp_wait_s = 0, bubble_wait_s = 0, dp_wait_s = 0;
  double rs_end = 0;        // end of the last ZeRO-2/3 reduce-scatter (per-group buckets: one in flight)
  // That reduce-scatter's fold into the gradient shard, run before the next one is issued.
  struct Fold {
    bool pending = false;
    int64_t mb = -1, stage = -1, layer = -1;
    double s = 0, bytes = 0;
  } fold;
};

class StepSimulator {
 public:
  StepSimulator(const Plan& plan, const PlanCosts& pc, TraceRecorder* rec) : plan_(plan), pc_(pc), rec_(rec) {
    const Layout& l = plan.layout;
    pp_ = l.pp;
    v_ = l.virtual_stages;
    stages_ = pp_ * v_;
    m_ = pc.microbatches;
    ranks_.resize(static_cast<size_t>(pp_));
    for (int64_t r = 0; r < pp_; ++r) {
      RankState& s = ranks_[static_cast<size_t>(r)];
      s.order = PipelineOrder(l.schedule, pp_, r, m_, v_);
      s.last_bwd.assign(static_cast<size_t>(v_), 0);
      for (size_t i = 0; i < s.order.size(); ++i) {
        if (s.order[i].kind == PipeOpKind::kBackward) s.last_bwd[static_cast<size_t>(s.order[i].chunk)] = i;
      }
    }
    fwd_arrival_.assign(static_cast<size_t>(stages_ * m_), -1.0);
    bwd_arrival_.assign(static_cast<size_t>(stages_ * m_), -1.0);
    fwd_sent_.assign(static_cast<size_t>(stages_ * m_), 0.0);
    bwd_sent_.assign(static_cast<size_t>(stages_ * m_), 0.0);
  }

  Prediction Run() {
    // The step starts by zeroing the gradient accumulators (the executor's grad_zero op).
    for (int64_t r = 0; r < pp_; ++r) {
      const RankCost& rc = pc_.ranks[static_cast<size_t>(r)];
      ranks_[static_cast<size_t>(r)].t =
          Pass(r, 0, OpKind::kGradZero, rc.grad_zero_step_s, rc.grad_zero_step_bytes, -1, -1, -1, Phase::kOptim);
    }
    // ZeRO-1/2 with overlap_param_gather: the previous step's parameter gather runs now, under the
    // first forward of each chunk, which waits for its units' parameters (RunPipeOp).
    gather_ready_.assign(static_cast<size_t>(pp_), {});
    for (int64_t r = 0; r < pp_; ++r) {
      const RankCost& rc = pc_.ranks[static_cast<size_t>(r)];
      if (!rc.dp.gather_overlapped || rc.dp.gather_after_s <= 0) continue;  // set for dp > 1 only
      ParamGather(r, 0.0);
      gather_ready_[static_cast<size_t>(r)] = GatherReady(rc);
    }
    bool progress = true;
    while (progress) {
      progress = false;
      for (int64_t r = 0; r < pp_; ++r) {
        while (Step(r)) progress = true;
      }
    }
    // After the pipeline: tied-embedding all-reduce, grad-norm barrier, optimizer, ZeRO-1/2 gather.
    double barrier = 0;
    std::vector<double> pipe_end(static_cast<size_t>(pp_));
    for (int64_t r = 0; r < pp_; ++r) {
      RankState& s = ranks_[static_cast<size_t>(r)];
      const RankCost& rc = pc_.ranks[static_cast<size_t>(r)];
      if (s.fold.pending) {
        // The last reduce-scatter is folded once it has arrived (FinishGradSync).
        if (s.rs_end > s.t) {
          s.dp_wait_s += s.rs_end - s.t;
          s.t = s.rs_end;
        }
        s.t = FoldPending(r, s.t);
      }
      if (rc.sp_grad_coalesced_s > 0) {
        // Sequence parallelism, coalesced: one TP all-reduce of the whole-held parameters' gradients.
        Record(r, traces::Stream::kTpComm, OpKind::kTpAllReduce, Phase::kBwd, -1, -1, -1, s.t, rc.sp_grad_coalesced_s, -1,
               rc.sp_grad_coalesced_bytes);
        s.tp_s += rc.sp_grad_coalesced_s;
        s.t += rc.sp_grad_coalesced_s;
      }
      pipe_end[static_cast<size_t>(r)] = s.t;
      if (pc_.dp_after_backward && DenseReductionRanks(plan_.layout) > 1) {
        // One reduction of the whole gradient buffer once the backward is over (no overlap).
        DpOp(r, s.t, rc.GradReductionAfterBackward(), plan_.layout.zero_stage == 0 ? OpKind::kDpAllReduce : OpKind::kDpReduceScatter,
             -1, -1);
      }
      if (rc.dp.tied_embedding_s > 0) {
        // The stage holding this rank's copy of the tied word embedding (first or last).
        int64_t tied_stage = -1;
        for (const ParamGroupDef& g : rc.groups) {
          if (g.tied_pair) tied_stage = g.stage;
        }
        DpOp(r, s.t, rc.dp.tied_embedding_s, OpKind::kDpAllReduce, -1, -1, tied_stage);
      }
      barrier = std::max(barrier, std::max(s.t, s.dp_free));
    }
    double step = 0;
    for (int64_t r = 0; r < pp_; ++r) {
      RankState& s = ranks_[static_cast<size_t>(r)];
      const RankCost& rc = pc_.ranks[static_cast<size_t>(r)];
      // grad_clip: this rank's grad-norm read, then the world all-reduce, which ends after the
      // slowest rank's read (the executor's op spans both, waiting included).
      const double opt_start = barrier + pc_.grad_norm_s + pc_.clip_sync_s;
      Record(r, traces::Stream::kCompute, OpKind::kGradClip, Phase::kOptim, -1, -1, -1, barrier, opt_start - barrier);
      Record(r, traces::Stream::kCompute, OpKind::kOptimizer, Phase::kOptim, -1, -1, -1, opt_start, rc.optimizer_s);
      double end = opt_start + rc.optimizer_s;
      // ZeRO-1/2: the updated parameters gathered after the step, unless the profile overlaps that
      // gather with the next step's forward (started in Run's prologue instead).
      if (rc.dp.gather_after_s > 0 && !rc.dp.gather_overlapped) end = ParamGather(r, end);
      s.compute_s += rc.grad_norm_s + rc.optimizer_s;
      step = std::max(step, end);
    }
    const RankState& s0 = ranks_[0];
    Breakdown b;
    b.compute_s = s0.compute_s;
    b.tp_comm_s = s0.tp_s;
    b.pp_comm_s = s0.pp_wait_s;
    b.dp_comm_s = s0.dp_wait_s + (step - pipe_end[0] - pc_.ranks[0].grad_norm_s - pc_.ranks[0].optimizer_s);
    b.bubble_s = std::max(0.0, step - b.compute_s - b.tp_comm_s - b.pp_comm_s - b.dp_comm_s);
    Prediction p = FinishPrediction(plan_, step, b);
    p.simulated = true;
    return p;
  }

  int64_t Events() const { return events_; }

 private:
  size_t Idx(int64_t stage, int64_t mb) const { return static_cast<size_t>(stage * m_ + mb); }

  void Record(int64_t r, traces::Stream stream, OpKind op, Phase ph, int64_t mb, int64_t stage, int64_t layer,
              double start, double dur, double flops = -1, double bytes = -1) {
    ++events_;
    if (rec_) rec_->Record(r, stream, op, ph, mb, stage, layer, start, dur, flops, bytes);
  }

  //! A memory pass of the ZeRO bookkeeping (plan_costs.h ZeroPasses) on rank r's compute stream
  //! at `t`; returns its end. Recorded when our executor runs one (bytes > 0).
  double Pass(int64_t r, double t, OpKind op, double dur, double bytes, int64_t mb, int64_t stage, int64_t layer,
              Phase phase) {
    if (bytes <= 0) return t;
    ranks_[static_cast<size_t>(r)].compute_s += dur;
    Record(r, traces::Stream::kCompute, op, phase, mb, stage, layer, t, dur, -1, bytes);
    return t + dur;
  }

  //! Whether micro-batch `mb`'s backward adds its weight gradients in a pass of its own (the
  //! profile's grad_accumulation; the pass times are 0 when it accumulates in the GEMM).
  bool AccumulatesAt(int64_t mb) const {
    return !(plan_.implementation.grad_accumulation.value == GradAccumulation::kAfterFirst && mb == 0);
  }

  //! Folds the reduce-scatter in flight into the shard (its identity: the reduce-scatter's).
  double FoldPending(int64_t r, double t) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    if (!s.fold.pending) return t;
    s.fold.pending = false;
    return Pass(r, t, OpKind::kGradFold, s.fold.s, s.fold.bytes, s.fold.mb, s.fold.stage, s.fold.layer, Phase::kComm);
  }

  //! Enqueues a DP collective on rank r's DP stream; returns its end.
  //! Identity as the executor records it: the model stage holding the layer, and the micro-batch
  //! only for per-micro-batch collectives (ZeRO-2/3 reduce-scatter, ZeRO-3 gathers), else -1.
  //! `bytes`: the message (refine samples the collective at it); -1 when the op is not one bucket.
  double DpOp(int64_t r, double ready, double dur, OpKind op, int64_t mb, int64_t layer, int64_t stage = -1,
              Phase phase = Phase::kComm, double bytes = -1) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    const double start = std::max(ready, s.dp_free);
    s.dp_free = start + dur;
    Record(r, traces::Stream::kDpComm, op, phase, mb, stage, layer, start, dur, -1, bytes);
    return s.dp_free;
  }

  //! Issues the gradient collective of one group at compute time `t`; returns the compute time
  //! after it. ZeRO-2/3 with per-group buckets keeps kReduceScattersInFlight reduce-scatters in
  //! flight (model/param_groups.h): the compute waits for the previous one before issuing the next.
  //! `passes`: the group's memory passes (its fold runs before the next reduce-scatter is issued).
  double GradOp(int64_t r, double t, double dur, double bytes, int64_t mb, int64_t layer, int64_t stage,
                const ZeroPasses& passes) {
    static_assert(kReduceScattersInFlight == 1, "RankState keeps one reduce-scatter (rs_end, fold)");
    RankState& s = ranks_[static_cast<size_t>(r)];
    const int64_t zero = plan_.layout.zero_stage;
    if (zero >= 2 && pc_.ranks[static_cast<size_t>(r)].dp.per_group && s.rs_end > t) {
      s.dp_wait_s += s.rs_end - t;
      t = s.rs_end;
    }
    t = FoldPending(r, t);
    if (zero >= 2 && passes.fold_bytes > 0) s.fold = {true, mb, stage, layer, passes.fold_s, passes.fold_bytes};
    const double end = DpOp(r, t, dur, zero == 0 ? OpKind::kDpAllReduce : OpKind::kDpReduceScatter,
                            zero >= 2 ? mb : -1, layer, stage, Phase::kComm, bytes);
    if (zero >= 2) s.rs_end = end;
    return t;
  }

  //! ZeRO-1/2: the rank's parameter all-gather after an optimizer step, from `t` on the DP stream
  //! (per-group buckets: one per group, in group order, model/param_groups.h); returns its end.
  double ParamGather(int64_t r, double t) {
    const RankCost& rc = pc_.ranks[static_cast<size_t>(r)];
    if (!rc.dp.per_group) return DpOp(r, t, rc.dp.gather_after_s, OpKind::kDpAllGather, -1, -1);
    for (const ChunkCost& cc : rc.chunks) {
      for (const DpCost::OuterGroup& g : rc.dp.outer) {
        if (g.GatheredBeforeLayers(cc)) t = DpOp(r, t, g.gather_after_s, OpKind::kDpAllGather, -1, -1, cc.stage,
                                                 Phase::kComm, g.param_bytes);
      }
      for (int64_t i = 0; i < cc.units(); ++i) {
        t = DpOp(r, t, rc.dp.gather_after_layer_s, OpKind::kDpAllGather, -1, cc.UnitLayer(i, plan_.model.layers), cc.stage,
                 Phase::kComm, rc.dp.param_layer_bytes);
      }
      for (const DpCost::OuterGroup& g : rc.dp.outer) {
        if (g.GatheredAfterLayers(cc)) t = DpOp(r, t, g.gather_after_s, OpKind::kDpAllGather, -1, -1, cc.stage,
                                                Phase::kComm, g.param_bytes);
      }
    }
    return t;
  }

  //! ZeRO-3: gathers the groups outside the layers that a unit pass uses (the embedding's or the
  //! head's) when it runs, in acquire order; nothing prefetches them (prefetch_ahead 0), so the
  //! compute waits. Returns the compute time.
  double GatherOuter(int64_t r, double t, bool embedding_pass, int64_t mb, int64_t stage, Phase phase) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    const DpCost& dp = pc_.ranks[static_cast<size_t>(r)].dp;
    const ChunkPass unit = embedding_pass ? ChunkPass::kEmbedding : ChunkPass::kHead;
    for (int round = 0; round < kAcquireRounds; ++round) {
      for (const DpCost::OuterGroup& g : dp.outer) {
        if (AcquireRound(g.group, stage, unit) != round) continue;
        t = Pass(r, t, OpKind::kShardCopy, g.passes.copy_s, g.passes.copy_bytes, mb, stage, -1, phase);
        const double end = DpOp(r, t, g.gather_s, OpKind::kDpAllGather, mb, -1, stage, phase, g.param_bytes);
        s.dp_wait_s += end - t;
        t = end;
      }
    }
    return t;
  }

  //! ZeRO-2/3: zero-fills the transient gradients of the groups whose first backward pass
  //! (ParamGroupDef::grad_first_pass) is chunk `cc`'s embedding or head pass, in acquire order.
  double ZeroOuter(int64_t r, double t, bool embedding_pass, const ChunkCost& cc, int64_t mb) {
    const ChunkPass unit = embedding_pass ? ChunkPass::kEmbedding : ChunkPass::kHead;
    for (int round = 0; round < kAcquireRounds; ++round) {
      for (const DpCost::OuterGroup& g : pc_.ranks[static_cast<size_t>(r)].dp.outer) {
        if (AcquireRound(g.group, cc.stage, unit) != round || g.group.grad_first_pass != unit) continue;
        t = Pass(r, t, OpKind::kGradZero, g.passes.zero_s, g.passes.zero_bytes, mb, cc.stage, -1, Phase::kBwd);
      }
    }
    return t;
  }

  //! Runs the ops of one unit pass starting at `t`; returns the end time. `zero`: a layer's
  //! gradient zero-fill, run before its first backward op (after the recompute).
  double RunOps(int64_t r, const std::vector<CostedOp>& ops, int64_t mb, int64_t stage, int64_t layer, double t,
                const ZeroPasses* zero = nullptr) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    for (const CostedOp& o : ops) {
      if (zero != nullptr && o.phase == Phase::kBwd) {
        t = Pass(r, t, OpKind::kGradZero, zero->zero_s, zero->zero_bytes, mb, stage, layer, Phase::kBwd);
        zero = nullptr;
      }
      double d = o.time_s;
      if (o.tp_comm) {
        s.tp_s += d;
        Record(r, traces::Stream::kTpComm, o.op, o.phase, mb, stage, layer, t, d, -1, o.bytes);
      } else {
        if (s.dp_free > t && pc_.contention > 1.0) {
          const double p = std::min(d, (s.dp_free - t) / pc_.contention);
          d = p * pc_.contention + (d - p);
        }
        s.compute_s += d;
        Record(r, traces::Stream::kCompute, o.op, o.phase, mb, stage, layer, t, d, o.flops > 0 ? o.flops : -1,
               o.bytes > 0 ? o.bytes : -1);
      }
      t += d;
    }
    return t;
  }

  bool Step(int64_t r) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    if (s.next >= s.order.size()) return false;
    const PipeOp op = s.order[s.next];
    const int64_t stage = ModelStage(pp_, r, op.chunk);
    const bool fwd = op.kind == PipeOpKind::kForward;
    double ready = s.t;
    double sent = s.t;
    if (fwd && stage > 0) {
      const double a = fwd_arrival_[Idx(stage, op.microbatch)];
      if (a < 0) return false;
      ready = a;
      sent = fwd_sent_[Idx(stage, op.microbatch)];
    } else if (!fwd && stage < stages_ - 1) {
      const double a = bwd_arrival_[Idx(stage, op.microbatch)];
      if (a < 0) return false;
      ready = a;
      sent = bwd_sent_[Idx(stage, op.microbatch)];
    }
    double t = s.t;
    if (ready > s.t) {
      // Waiting: the part after the producer finished is communication, the rest is bubble.
      const double comm_wait = std::min(ready - s.t, ready - std::max(sent, s.t));
      s.pp_wait_s += comm_wait;
      s.bubble_wait_s += (ready - s.t) - comm_wait;
      t = ready;
    }
    // Every receive is recorded (zero length when the data had already arrived), with the phase of
    // its pass, as the executor records it.
    if (pc_.p2p_s > 0 && ((fwd && stage > 0) || (!fwd && stage < stages_ - 1))) {
      const double recv_start = ready > s.t ? std::max(sent, s.t) : s.t;
      Record(r, traces::Stream::kPpComm, OpKind::kPpRecv, fwd ? Phase::kFwd : Phase::kBwd, op.microbatch, stage, -1,
             recv_start, t - recv_start);
    }
    const bool last_bwd = !fwd && s.last_bwd[static_cast<size_t>(op.chunk)] == s.next;
    ++s.next;
    t = RunPipeOp(r, op, stage, t, last_bwd);
    s.t = t;
    // Send to the neighbouring stage through this rank's FIFO link.
    const int64_t mb = op.microbatch;
    // The link of boundary stage -> stage + 1 (forward) or stage - 1 -> stage (backward).
    if (fwd && stage < stages_ - 1) {
      const double c = pc_.boundary_p2p_s[static_cast<size_t>(stage)];
      const double start = std::max(t, s.send_fwd_free);
      s.send_fwd_free = start + c;
      fwd_sent_[Idx(stage + 1, mb)] = t;
      fwd_arrival_[Idx(stage + 1, mb)] = s.send_fwd_free;
      if (pc_.blocking_p2p) s.t = s.send_fwd_free;
      if (c > 0) Record(r, traces::Stream::kPpComm, OpKind::kPpSend, Phase::kFwd, mb, stage, -1, start, c);
    } else if (!fwd && stage > 0) {
      const double c = pc_.boundary_p2p_s[static_cast<size_t>(stage - 1)];
      const double start = std::max(t, s.send_bwd_free);
      s.send_bwd_free = start + c;
      bwd_sent_[Idx(stage - 1, mb)] = t;
      bwd_arrival_[Idx(stage - 1, mb)] = s.send_bwd_free;
      if (pc_.blocking_p2p) s.t = s.send_bwd_free;
      if (c > 0) Record(r, traces::Stream::kPpComm, OpKind::kPpSend, Phase::kBwd, mb, stage, -1, start, c);
    }
    return true;
  }

  //! `last_bwd`: the chunk's final backward of the step (its gradients are complete afterwards).
  double RunPipeOp(int64_t r, const PipeOp& op, int64_t stage, double t, bool last_bwd) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    const RankCost& rc = pc_.ranks[static_cast<size_t>(r)];
    const ChunkCost& cc = rc.chunks[static_cast<size_t>(op.chunk)];
    const UnitCosts& u = *pc_.units;
    const bool fwd = op.kind == PipeOpKind::kForward;
    const int64_t mb = op.microbatch;
    const int64_t zero = plan_.layout.zero_stage;
    // ZeRO-0/1 reduce once, after the last backward (or after the whole pipeline: dp_after_backward).
    const bool grads_now = zero >= 2 || (last_bwd && !pc_.dp_after_backward);
    const bool dp = DenseReductionRanks(plan_.layout) > 1;
    const int64_t n = cc.units();
    const Phase pass = fwd ? Phase::kFwd : Phase::kBwd;
    const bool zero3 = dp && zero == 3;
    // Sequence parallelism, per parameter (sp_grad_reduction): the whole-held parameters' gradient
    // all-reduces before each reduction: every backward when ZeRO shards gradients, else the last.
    const bool sp_sync = !fwd && plan_.implementation.sp_grad_reduction.value == SpGradReduction::kPerParameter &&
                         (zero >= 2 || last_bwd);
    // Per-group buckets (our executor) gather the embedding's and the head's groups when their unit
    // runs and the first layer's when the pass reaches it (prefetched by nothing); size-based
    // buckets issue the first layer's gather when the pass starts (prefetched behind the unit).
    const bool per_group = rc.dp.per_group;
    // The chunk's layer passes: its decoder layers, then its MTP modules (ChunkCost::UnitLayer).
    auto layer_at = [&](int64_t i) { return cc.UnitLayer(fwd ? i : n - 1 - i, plan_.model.layers); };
    // ZeRO-3: the gather of layer i is issued when layer i-1 starts (prefetch one ahead), recorded
    // with the pass's phase, as the executor records it (the pass that needs the parameters). A
    // profile that prefetches nothing (a layer's prefetch_ahead 0) issues it when layer i is reached;
    // deeper prefetch keeps the one-ahead pacing (the DP stream is the bottleneck either way).
    const bool prefetch = LayerPrefetchAhead(plan_.implementation) > 0;
    std::vector<double> gathered;
    const ZeroPasses& lp = rc.dp.layer_passes;
    auto first_gather = [&] {
      if (!zero3 || n <= 0) return;
      gathered.resize(static_cast<size_t>(n));
      t = Pass(r, t, OpKind::kShardCopy, lp.copy_s, lp.copy_bytes, mb, stage, layer_at(0), pass);
      gathered[0] =
          DpOp(r, t, rc.dp.gather_layer_s, OpKind::kDpAllGather, mb, layer_at(0), stage, pass, rc.dp.gather_ahead_bytes);
    };
    // The embedding's or the head's pass, after gathering its groups when they are gathered per group.
    auto outer_unit = [&](const std::vector<CostedOp>& ops, bool embedding) {
      if (zero3 && per_group) t = GatherOuter(r, t, embedding, mb, stage, pass);
      if (!fwd && zero >= 2 && dp) t = ZeroOuter(r, t, embedding, cc, mb);
      t = RunOps(r, ops, mb, stage, -1, t);
      if (!fwd && AccumulatesAt(mb)) {
        t = Pass(r, t, OpKind::kGradAccum, embedding ? rc.accum_embedding_s : rc.accum_head_s,
                 embedding ? rc.accum_embedding_bytes : rc.accum_head_bytes, mb, stage, -1, pass);
      }
    };
    // The step's first forward of the chunk waits for the parameters the overlapped gather brings.
    const auto& ready_of_rank = gather_ready_[static_cast<size_t>(r)];
    const ChunkGatherReady* ready =
        fwd && mb == 0 && !ready_of_rank.empty() ? &ready_of_rank[static_cast<size_t>(op.chunk)] : nullptr;
    auto wait_params = [&](double at) {
      if (ready == nullptr || at <= t) return;
      s.dp_wait_s += at - t;
      t = at;
    };
    if (!per_group) first_gather();
    if (fwd && cc.embedding) {
      wait_params(ready ? ready->embedding : 0.0);
      outer_unit(u.embedding.fwd, true);
    }
    if (!fwd && cc.head) outer_unit(u.head.bwd, false);
    if (per_group) first_gather();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t layer = layer_at(i);
      if (ready != nullptr) wait_params(ready->layers + static_cast<double>(i + 1) * ready->per_layer);
      if (!gathered.empty()) {
        if (!prefetch && i > 0) {
          t = Pass(r, t, OpKind::kShardCopy, lp.copy_s, lp.copy_bytes, mb, stage, layer, pass);
          gathered[static_cast<size_t>(i)] =
              DpOp(r, t, rc.dp.gather_layer_s, OpKind::kDpAllGather, mb, layer, stage, pass, rc.dp.gather_ahead_bytes);
        }
        if (gathered[static_cast<size_t>(i)] > t) {
          s.dp_wait_s += gathered[static_cast<size_t>(i)] - t;
          t = gathered[static_cast<size_t>(i)];
        }
        if (rc.dp.gather_demand_layer_s > 0) {
          // The rest of the layer (beyond the prefetch budget), gathered now; the compute waits.
          const double end = DpOp(r, t, rc.dp.gather_demand_layer_s, OpKind::kDpAllGather, mb, layer, stage, pass,
                                  rc.dp.gather_demand_bytes);
          s.dp_wait_s += end - t;
          t = end;
        }
        if (prefetch && i + 1 < n) {
          t = Pass(r, t, OpKind::kShardCopy, lp.copy_s, lp.copy_bytes, mb, stage, layer_at(i + 1), pass);
          gathered[static_cast<size_t>(i + 1)] =
              DpOp(r, t, rc.dp.gather_layer_s, OpKind::kDpAllGather, mb, layer_at(i + 1), stage, pass,
                   rc.dp.gather_ahead_bytes);
        }
      }
      const UnitOps& lu = u.Layer(layer);
      t = RunOps(r, fwd ? lu.fwd : lu.bwd, mb, stage, layer, t, !fwd && dp && zero >= 2 ? &lp : nullptr);
      if (!fwd && AccumulatesAt(mb)) t = Pass(r, t, OpKind::kGradAccum, rc.accum_layer_s, rc.accum_layer_bytes, mb, stage, layer, pass);
      if (sp_sync) t = RunOps(r, lu.grad_sync, mb, stage, layer, t);
      if (!fwd && dp && grads_now) t = GradOp(r, t, rc.dp.grad_layer_s, rc.dp.grad_layer_bytes, mb, layer, stage, lp);
    }
    if (fwd && cc.head) {
      wait_params(ready ? ready->head : 0.0);
      outer_unit(u.head.fwd, false);
    }
    if (!fwd && cc.embedding) outer_unit(u.embedding.bwd, true);
    if (sp_sync) {
      // The outer groups' whole-held parameters, in group order (model/param_groups.h): the
      // embedding's, then the head's.
      if (cc.embedding) t = RunOps(r, u.embedding.grad_sync, mb, stage, -1, t);
      if (cc.head) t = RunOps(r, u.head.grad_sync, mb, stage, -1, t);
    }
    if (!fwd && dp && grads_now && (cc.embedding || cc.head)) {
      // The chunk's outer groups, after its last unit, in group order (model/param_groups.h).
      for (const DpCost::OuterGroup& g : rc.dp.outer) {
        if (g.ReducedBy(cc)) t = GradOp(r, t, g.grad_s, g.grad_bytes, mb, -1, stage, g.passes);
      }
    }
    return t;
  }

  const Plan& plan_;
  const PlanCosts& pc_;
  TraceRecorder* rec_;
  int64_t pp_ = 1, v_ = 1, stages_ = 1, m_ = 1;
  std::vector<RankState> ranks_;
  std::vector<double> fwd_arrival_, bwd_arrival_, fwd_sent_, bwd_sent_;
  std::vector<std::vector<ChunkGatherReady>> gather_ready_;  //!< per rank, per chunk (overlapped gathers)
  int64_t events_ = 0;
};

}  // namespace

Result<SimResult> Simulate(const Plan& plan, const CostDb* db, const SimOptions& options) {
  PX_TRY(ValidateLayout(plan.layout, plan.model, plan.cluster));
  CostContext ctx(plan.cluster, plan.training.precision, db, &plan.implementation);
  const PlanCosts pc = CostPlan(ctx, plan);
  std::optional<TraceRecorder> rec;
  if (options.record_trace) rec.emplace(plan, options);
  StepSimulator sim(plan, pc, rec ? &*rec : nullptr);
  SimResult out;
  out.prediction = sim.Run();
  out.events = sim.Events();
  if (rec) out.trace = rec->Take();
  return out;
}

}  // namespace parallax::planner
