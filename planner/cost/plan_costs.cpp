#include "planner/cost/plan_costs.h"

#include <algorithm>

#include "planner/cost/placement.h"
#include "planner/memory/memory_model.h"

namespace parallax::planner {

double MixedPrecisionPassBytes(const ImplementationProfile& impl, Precision precision) {
  if (!impl.mixed_precision_passes.value || precision == Precision::kFp32) return 0;
  const double buffer = static_cast<double>(GradBufferBytes(precision, impl));
  const double cast_grads = buffer < 4 ? buffer + 4 : 0;
  const double unscale = precision == Precision::kFp16 ? 4 + 4 : 0;
  return cast_grads + unscale + 4 + 2;
}

double OptimizerBytesPerParam(const ImplementationProfile& impl, Precision precision) {
  // Per-tensor AdamW (no multi-tensor kernel) re-reads each moment in its own pass: ~2x the bytes.
  // A mixed-precision wrapper's own passes (gradient cast, fp16 unscale, master-weight copy) move
  // more over the same shard (MixedPrecisionPassBytes, the profile's mixed_precision_passes).
  return (impl.optimizer.value == OptimizerKind::kPerTensor ? 56.0 : 28.0) + MixedPrecisionPassBytes(impl, precision);
}

DType ComputeDType(Precision p) {
  switch (p) {
    case Precision::kBf16: return DType::kBf16;
    case Precision::kFp16: return DType::kFp16;
    case Precision::kFp32: return DType::kFp32;
  }
  return DType::kBf16;
}

CostContext::CostContext(const ClusterSpec& cluster, Precision precision, const CostDb* db,
                         const ImplementationProfile* impl)
    : cluster_(cluster),
      precision_(precision),
      impl_(impl ? *impl : DefaultImplementation()),
      compute_(cluster.device, ComputeDType(precision), db),
      collectives_(cluster, db, impl_.dp_algorithm.value) {}

const UnitCosts& CostContext::Units(const ModelSpec& model, const Layout& l, int64_t seq_len) {
  if (cached_model_ != model) {
    cache_.clear();
    cached_model_ = model;
  }
  const UnitKey key{l.tp, l.micro_batch, seq_len, l.sequence_parallel, l.recompute};
  for (const auto& [k, u] : cache_) {
    if (k == key) return u;
  }
  cache_.emplace_back(key, BuildUnitCosts(model, key, compute_, collectives_, PlaceGroup(l, cluster_, GroupKind::kTp), impl_));
  return cache_.back().second;
}

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

}  // namespace

std::vector<ChunkGatherReady> GatherReady(const RankCost& rc) {
  const DpCost& dp = rc.dp;
  double bytes = 0;
  for (const ChunkCost& cc : rc.chunks) bytes += dp.param_layer_bytes * static_cast<double>(cc.layers.count);
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
    t += static_cast<double>(cc.layers.count) * c.per_layer;
    for (const DpCost::OuterGroup& g : dp.outer) {
      if (g.GatheredAfterLayers(cc)) t += secs(g.param_bytes, g.gather_after_s);
    }
    c.head = t;
    out.push_back(c);
  }
  return out;
}

PlanCosts CostPlan(CostContext& ctx, const Plan& plan) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : m.seq_len;
  const UnitCosts& u = ctx.Units(m, l, seq);
  const CollectiveModel& coll = ctx.collectives();
  const ComputeModel& comp = ctx.compute();
  const double e = static_cast<double>(comp.element_bytes());
  const ImplementationProfile& impl = ctx.implementation();
  // Gradient bytes on the wire: fp32 training sends 4 B; 16-bit training sends what the profile
  // reduces (fp32 main_grad buffers in Megatron-Core, the 16-bit gradients in 2021 / DeepSpeed).
  const double grad_e = static_cast<double>(GradReduceBytes(plan.training.precision, impl));
  const double param_e = plan.training.precision == Precision::kFp32 ? 4.0 : 2.0;  // gathered weights
  const int64_t stages = ModelStages(l);

  PlanCosts pc;
  pc.units = &u;
  pc.microbatches = l.num_microbatches();
  pc.contention = comp.contention_factor();
  pc.dp_overlapped = l.dp > 1 && impl.overlap_dp_reduce.value;
  pc.dp_after_backward = !impl.overlap_dp_reduce.value && l.zero_stage <= 1;
  pc.blocking_p2p = impl.pipeline_p2p.value == P2pSemantics::kBlocking;

  // Send/recv between stages: Megatron's scatter/gather (Narayanan et al. SC'21, section 4.1)
  // sends 1/tp of the activation per TP rank, then all-gathers it over NVLink. Each boundary is
  // placed on its own: whether its rank pairs share a node depends on where the stages sit.
  if (l.pp > 1) {
    const double act = e * static_cast<double>(l.micro_batch * seq * m.hidden);
    const PlacedGroup tpg = PlaceGroup(l, ctx.cluster(), GroupKind::kTp);
    const double gather = l.tp > 1 && !l.sequence_parallel ? coll.Time(CollectiveKind::kAllGather, act, tpg) : 0.0;
    std::vector<double> hop_s(static_cast<size_t>(l.pp), 0.0);  // pipeline rank r -> (r + 1) % pp
    for (int64_t r = 0; r < std::min(l.pp, stages - 1); ++r) {
      const PlacedGroup hop = PlacePipelineHop(l, ctx.cluster(), r, (r + 1) % l.pp);
      hop_s[static_cast<size_t>(r)] = coll.Time(CollectiveKind::kSendRecv, act / static_cast<double>(l.tp), hop) + gather;
    }
    for (int64_t s = 0; s + 1 < stages; ++s) {
      pc.boundary_p2p_s.push_back(hop_s[static_cast<size_t>(s % l.pp)]);
      pc.p2p_s = std::max(pc.p2p_s, pc.boundary_p2p_s.back());
    }
  }

  // The layers' reduction group (each outer group places its own).
  const PlacedGroup dpg = PlaceReduction(l, ctx.cluster(), ReducedOver(ParamGroupKind::kLayer));
  const double layer_params = static_cast<double>(LayerParamsPerTpRank(m, l.tp));
  const CollectiveKind grad_coll = l.zero_stage == 0 ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
  // A memory pass on the compute stream (ZeroPasses), as the layer ops price theirs: the kernel
  // family's measured curve (falling back to the streaming "elementwise" one), plus the mean detour.
  auto pass = [&](OpKind op, double bytes) {
    const double t = comp.MemoryBound(MemoryFamily(op, Phase::kComm), bytes);
    return t + comp.noise().MeanExcess(t);
  };
  // Our executor's per-group passes for a group of `params` parameters (per TP rank).
  auto zero_passes = [&](double params) {
    ZeroPasses z;
    const double shard = params / static_cast<double>(l.dp);
    if (l.zero_stage == 3) {
      z.copy_bytes = 2.0 * param_e * shard;
      z.copy_s = pass(OpKind::kShardCopy, z.copy_bytes);
    }
    if (l.zero_stage >= 2) {
      z.zero_bytes = 4.0 * params;
      z.zero_s = pass(OpKind::kGradZero, z.zero_bytes);
      z.fold_bytes = 12.0 * shard;
      z.fold_s = pass(OpKind::kGradFold, z.fold_bytes);
    }
    return z;
  };
  PlacedGroup world;
  world.size = l.world_size();
  world.gpus_per_node = ctx.cluster().gpus_per_node;
  world.ranks_per_node = std::min(world.size, world.gpus_per_node);
  world.nodes = (world.size + world.ranks_per_node - 1) / world.ranks_per_node;
  pc.clip_sync_s = coll.Time(CollectiveKind::kAllReduce, 4.0, world);

  // A per-unit figure summed over a chunk's units: its layers, and the embedding / head it holds.
  auto chunk_sum = [&u](const ChunkCost& cc, double UnitOps::*f) {
    return static_cast<double>(cc.layers.count) * u.layer.*f + (cc.embedding ? u.embedding.*f : 0.0) +
           (cc.head ? u.head.*f : 0.0);
  };
  pc.ranks.resize(static_cast<size_t>(l.pp));
  for (int64_t r = 0; r < l.pp; ++r) {
    RankCost& rc = pc.ranks[static_cast<size_t>(r)];
    for (int64_t c = 0; c < l.virtual_stages; ++c) {
      ChunkCost cc;
      cc.stage = ModelStage(l.pp, r, c);
      cc.layers = StageLayers(m.layers, stages, cc.stage);
      cc.embedding = cc.stage == 0;
      cc.head = cc.stage == stages - 1;
      cc.fwd_s = chunk_sum(cc, &UnitOps::fwd_s);
      cc.bwd_s = chunk_sum(cc, &UnitOps::bwd_s);
      cc.fwd_tp_s = chunk_sum(cc, &UnitOps::fwd_tp_s);
      cc.bwd_tp_s = chunk_sum(cc, &UnitOps::bwd_tp_s);
      rc.fwd_s += cc.fwd_s;
      rc.bwd_s += cc.bwd_s;
      rc.fwd_tp_s += cc.fwd_tp_s;
      rc.bwd_tp_s += cc.bwd_tp_s;
      rc.chunks.push_back(cc);
    }
    rc.groups = RankParamGroups(plan, r);
    rc.params = TotalParams(rc.groups);
    if (!u.layer.grad_sync.empty() || !u.head.grad_sync.empty() || !u.embedding.grad_sync.empty()) {
      // Sequence parallelism: the whole-held parameters' gradients summed over TP.
      double sync_s = 0, sync_bytes = 0;
      for (const ChunkCost& cc : rc.chunks) {
        sync_s += chunk_sum(cc, &UnitOps::grad_sync_s);
        sync_bytes += chunk_sum(cc, &UnitOps::grad_sync_bytes);
      }
      if (impl.sp_grad_reduction.value == SpGradReduction::kCoalesced) {
        rc.sp_grad_coalesced_bytes = sync_bytes;
        rc.sp_grad_coalesced_s =
            coll.Time(CollectiveKind::kAllReduce, sync_bytes, PlaceGroup(l, ctx.cluster(), GroupKind::kTp));
      } else if (l.zero_stage >= 2) {
        for (ChunkCost& cc : rc.chunks) {
          const double add = chunk_sum(cc, &UnitOps::grad_sync_s);
          cc.bwd_s += add;
          cc.bwd_tp_s += add;
          rc.bwd_s += add;
          rc.bwd_tp_s += add;
        }
      } else {
        rc.sp_grad_last_s = sync_s;
      }
    }
    if (impl.grad_accumulation.value != GradAccumulation::kInGemm) {
      // Each micro-batch's weight gradients added into the buffer after the backward that makes
      // them (the 16-bit gradient read, the buffer read and written): one pass per layer, and one
      // per pass over the outer groups whose gradient it completes (ParamGroupDef::grad_pass).
      // Autograd's accumulation (kAfterFirst) takes the first micro-batch's gradient as it is: the
      // simulator skips micro-batch 0, the per-micro-batch chunk time carries (M-1)/M of a pass.
      const double per_param =
          param_e + 2.0 * static_cast<double>(GradBufferBytes(plan.training.precision, impl));
      rc.accum_layer_bytes = per_param * layer_params;
      rc.accum_layer_s = pass(OpKind::kGradAccum, rc.accum_layer_bytes);
      for (const ParamGroupDef& g : rc.groups) {
        if (g.kind == ParamGroupKind::kLayer) continue;
        double& bytes = g.grad_pass == ChunkPass::kEmbedding ? rc.accum_embedding_bytes : rc.accum_head_bytes;
        bytes += per_param * static_cast<double>(g.params);
      }
      rc.accum_embedding_s = rc.accum_embedding_bytes > 0 ? pass(OpKind::kGradAccum, rc.accum_embedding_bytes) : 0.0;
      rc.accum_head_s = rc.accum_head_bytes > 0 ? pass(OpKind::kGradAccum, rc.accum_head_bytes) : 0.0;
      const double mbs = static_cast<double>(pc.microbatches);
      const double share = impl.grad_accumulation.value == GradAccumulation::kAfterFirst ? (mbs - 1.0) / mbs : 1.0;
      for (ChunkCost& cc : rc.chunks) {
        const double add = share * (static_cast<double>(cc.layers.count) * rc.accum_layer_s +
                                    (cc.embedding ? rc.accum_embedding_s : 0.0) + (cc.head ? rc.accum_head_s : 0.0));
        cc.bwd_s += add;
        rc.bwd_s += add;
      }
    }
    int64_t layers_on_rank = 0;
    for (const auto& cc : rc.chunks) layers_on_rank += cc.layers.count;
    if (l.dp > 1) {
      const bool after = l.zero_stage == 1 || l.zero_stage == 2;
      rc.dp.per_group = impl.dp_bucket_MiB.value == 0 && impl.overlap_dp_reduce.value;
      rc.dp.grad_layer_bytes = grad_e * layer_params;
      rc.dp.param_layer_bytes = param_e * layer_params;
      rc.dp.grad_layer_s = coll.Time(grad_coll, grad_e * layer_params, dpg);
      if (l.zero_stage == 3) {
        // The part of a layer gathered ahead: all of it, or the profile's prefetch budget (DeepSpeed:
        // per module fetch, kZero3PrefetchesPerLayer of them); the rest when the layer is reached.
        const int64_t budget = impl.zero3_prefetch_params.value;
        const bool split = budget > 0 && impl.zero3_prefetch_layers.value > 0 &&
                           kZero3PrefetchesPerLayer * static_cast<double>(budget) < layer_params;
        const double ahead = split ? kZero3PrefetchesPerLayer * static_cast<double>(budget) : layer_params;
        rc.dp.gather_ahead_bytes = param_e * ahead;
        rc.dp.gather_layer_s = coll.Time(CollectiveKind::kAllGather, rc.dp.gather_ahead_bytes, dpg);
        if (split) {
          rc.dp.gather_demand_bytes = param_e * (layer_params - ahead);
          rc.dp.gather_demand_layer_s = coll.Time(CollectiveKind::kAllGather, rc.dp.gather_demand_bytes, dpg);
        }
      }
      std::vector<ParamGroupDef> groups;
      for (const ParamGroupDef& g : rc.groups) {
        if (g.kind != ParamGroupKind::kLayer) groups.push_back(g);
      }
      // Size-based buckets: the outer gradients reduce as one bucket, are gathered as one.
      if (!rc.dp.per_group && !groups.empty()) groups = {MergedGroup(groups)};
      for (const ParamGroupDef& g : groups) {
        DpCost::OuterGroup o;
        o.group = g;
        o.embedding = g.uses_embedding;
        o.head = g.uses_head;
        o.grad_bytes = grad_e * static_cast<double>(g.params);
        o.param_bytes = static_cast<double>(g.bytes);
        const PlacedGroup reduction = PlaceReduction(l, ctx.cluster(), g.reduced_over);
        o.grad_s = coll.Time(grad_coll, o.grad_bytes, reduction);
        const double gather_s = coll.Time(CollectiveKind::kAllGather, o.param_bytes, reduction);
        if (l.zero_stage == 3) o.gather_s = gather_s;
        if (rc.dp.per_group) o.passes = zero_passes(static_cast<double>(g.params));
        rc.dp.grad_outer_s += o.grad_s;
        if (after && rc.dp.per_group) {
          o.gather_after_s = gather_s;
          rc.dp.gather_after_s += o.gather_after_s;
        }
        rc.dp.outer.push_back(o);
      }
      if (rc.dp.per_group) {
        rc.dp.layer_passes = zero_passes(layer_params);
        // The passes run on the compute stream inside each pass over a chunk (simulator.cpp walks
        // them one by one): shard copies before the gathers of the groups a pass uses, a group's
        // zero-fill in the first backward pass that uses it, and each reduce-scatter's fold.
        for (ChunkCost& cc : rc.chunks) {
          const double n = static_cast<double>(cc.layers.count);
          double f = n * rc.dp.layer_fwd_pass_s(), b = n * rc.dp.layer_bwd_pass_s();
          for (const DpCost::OuterGroup& o : rc.dp.outer) {
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
        // The last reduce-scatter of the step (chunk 0's last backward: the embedding's groups on
        // the first stage, else the chunk's first layer) is folded after the pipeline drains.
        const ChunkCost& first = rc.chunks.front();
        rc.final_fold_s = first.layers.count > 0 ? rc.dp.layer_passes.fold_s : 0.0;
        for (const DpCost::OuterGroup& o : rc.dp.outer) {
          if (o.ReducedBy(first)) rc.final_fold_s = o.passes.fold_s;
        }
      }
      rc.dp.gather_overlapped = after && impl.overlap_param_gather.value;
      if (after && rc.dp.per_group) {
        rc.dp.gather_after_layer_s = coll.Time(CollectiveKind::kAllGather, param_e * layer_params, dpg);
        rc.dp.gather_after_s += static_cast<double>(layers_on_rank) * rc.dp.gather_after_layer_s;
      } else if (after) {
        rc.dp.gather_after_s = coll.Time(CollectiveKind::kAllGather, param_e * static_cast<double>(rc.params), dpg);
      }
    }
    if (std::any_of(rc.groups.begin(), rc.groups.end(), [](const ParamGroupDef& g) { return g.tied_pair; })) {
      const PlacedGroup pair = PlacePipelineHop(l, ctx.cluster(), 0, l.pp - 1);
      rc.dp.tied_embedding_s =
          coll.Time(CollectiveKind::kAllReduce, grad_e * static_cast<double>(m.vocab) * static_cast<double>(m.hidden) /
                                                    static_cast<double>(l.tp), pair);
    }
    // AdamW: mixed reads grad 2 + master 4 + m 4 + v 4, writes master, m, v and the 16-bit copy
    // (28 B/param); fp32 reads 4 x 4 and writes 3 x 4 (28 B/param). Grad-norm reads the grads once.
    const double shard = static_cast<double>(rc.params) / static_cast<double>(l.zero_stage >= 1 ? l.dp : 1);
    const double grad_shard = static_cast<double>(rc.params) / static_cast<double>(l.zero_stage >= 2 ? l.dp : 1);
    const double adam_bytes = OptimizerBytesPerParam(impl, plan.training.precision);
    rc.grad_zero_step_bytes = 4.0 * grad_shard;
    rc.grad_zero_step_s = pass(OpKind::kGradZero, rc.grad_zero_step_bytes);
    rc.optimizer_s = comp.MemoryBound("optimizer", adam_bytes * shard);
    rc.optimizer_s += comp.noise().MeanExcess(rc.optimizer_s);
    rc.grad_norm_s = comp.MemoryBound("grad_clip", grad_e * grad_shard);
    rc.grad_norm_s += comp.noise().MeanExcess(rc.grad_norm_s);
    pc.grad_norm_s = std::max(pc.grad_norm_s, rc.grad_norm_s);
  }
  // System noise at pipeline receives: each boundary's transfer ends when the sending rank's
  // pass over its chunk (the compute since its previous receive) ends, so a receiver that waits
  // waits for the later of two ranks: the excess of a 2-rank synchronization after one pass.
  if (comp.noise().measured() && !pc.boundary_p2p_s.empty()) {
    pc.p2p_s = 0;
    for (size_t s = 0; s < pc.boundary_p2p_s.size(); ++s) {
      // Stage s is chunk s / pp of pipeline rank s % pp (model/schedule.h ModelStage).
      const ChunkCost& cc = pc.ranks[s % static_cast<size_t>(l.pp)].chunks[s / static_cast<size_t>(l.pp)];
      pc.boundary_p2p_s[s] += comp.noise().SyncExcess(0.5 * (cc.fwd_s + cc.bwd_s), 2);
      pc.p2p_s = std::max(pc.p2p_s, pc.boundary_p2p_s[s]);
    }
  }
  // System noise at the step's one world-wide synchronization (the grad-norm all-reduce): each TP
  // group arrives late by what its ranks' detours added over the step's compute (within a TP group
  // every TP collective has already waited for its latest rank), and all wait for the latest group.
  if (comp.noise().measured()) {
    double step_compute = 0;
    for (const RankCost& rc : pc.ranks) {
      step_compute = std::max(step_compute, static_cast<double>(pc.microbatches) * (rc.fwd_s + rc.bwd_s) + rc.grad_norm_s);
    }
    pc.clip_sync_noise_s = comp.noise().SyncExcess(step_compute, l.dp * l.pp);
    pc.clip_sync_s += pc.clip_sync_noise_s;
  }
  return pc;
}

}  // namespace parallax::planner
