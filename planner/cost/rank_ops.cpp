// CostPlan's per-rank phases: the chunks' passes (with the sequence-parallel gradient sync and the
// gradient accumulation they carry), the optimizer step's ops and the step's grad-norm all-reduce.
#include <algorithm>

#include "model/param_groups.h"
#include "model/schedule.h"
#include "model/stage_split.h"
#include "planner/cost/placement.h"
#include "planner/cost/plan_cost_phases.h"
#include "planner/memory/memory_model.h"
#include "model/rank_groups.h"

namespace parallax::planner {
namespace {

//! A per-unit figure summed over a chunk's units: its layers, its MTP modules, and the embedding /
//! head it holds.
double ChunkSum(const UnitCosts& u, const ChunkCost& cc, double UnitOps::*f) {
  double layers = static_cast<double>(cc.layers.count) * u.layer.*f;
  if (!u.layer_kind.empty()) {  // layers of more than one kind: each its own
    layers = 0;
    for (int64_t i = cc.layers.first; i < cc.layers.end(); ++i) layers += u.Layer(i).*f;
  }
  layers += static_cast<double>(cc.mtp) * u.mtp.*f;
  return layers + (cc.embedding ? u.embedding.*f : 0.0) + (cc.head ? u.head.*f : 0.0);
}

}  // namespace

double NoisyMemoryTime(const ComputeModel& comp, const char* family, double bytes) {
  const double t = comp.MemoryBound(family, bytes);
  return t + comp.noise().MeanExcess(t);
}

double MixedPrecisionPassBytes(const ImplementationProfile& impl, Precision precision, int64_t zero_stage) {
  if (!impl.mixed_precision_passes.value || precision == Precision::kFp32) return 0;
  const double buffer = static_cast<double>(GradBufferBytes(precision, impl));
  const double cast_grads = buffer < 4 && !OptimizerReadsGradBuffer(impl, zero_stage) ? buffer + 4 : 0;
  const double unscale = precision == Precision::kFp16 ? 4 + 4 : 0;
  return cast_grads + unscale + 4 + 2;
}

namespace {

//! Bytes of the FP8 weight copies and transposes of the rank's layers under fp8 (the memory model's
//! Fp8WeightCopyBytes over the rank's chunks), else 0.
int64_t CopiesOfRank(const CostInputs& in, const RankCost& rc) {
  if (in.plan.training.precision != Precision::kFp8) return 0;
  int64_t layers = 0;
  for (const ChunkCost& cc : rc.chunks) layers += cc.layers.count;
  return 2 * layers * static_cast<int64_t>(in.layer_params);
}

}  // namespace

double OptimizerBytesPerParam(const ImplementationProfile& impl, Precision precision, int64_t zero_stage) {
  // Per-tensor AdamW (no multi-tensor kernel) re-reads each moment in its own pass: ~2x the bytes.
  // A mixed-precision wrapper's own passes (gradient cast, fp16 unscale, master-weight copy) move
  // more over the same shard (MixedPrecisionPassBytes, the profile's mixed_precision_passes).
  // 28: the fp32 gradient read, and the master weights and both moments read and written (4 + 2 x 12).
  // Smaller optimizer state (optimizer_state_bytes) moves fewer bytes; a 16-bit run's optimizer that
  // steps on the 16-bit buffer (optimizer_reads_grad_buffer) reads 2 B of gradient.
  const bool fp32 = precision == Precision::kFp32;
  const double state = fp32 ? 12.0 : static_cast<double>(OptimizerStateBytes(impl, zero_stage));
  const double grad = !fp32 && OptimizerReadsGradBuffer(impl, zero_stage) ? 2.0 : 4.0;
  const double fused = grad + 2.0 * state;
  return (impl.optimizer.value == OptimizerKind::kPerTensor ? 2.0 * fused : fused) +
         MixedPrecisionPassBytes(impl, precision, zero_stage);
}

void CostChunks(const CostInputs& in, int64_t pp_rank, RankCost& rc) {
  const Layout& l = in.plan.layout;
  const int64_t stages = ModelStages(l);
  int64_t layers = 0;
  for (int64_t c = 0; c < l.virtual_stages; ++c) {
    ChunkCost cc;
    cc.stage = ModelStage(l.pp, pp_rank, c);
    cc.layers = StageLayers(l, in.plan.model.layers, cc.stage);
    cc.mtp = in.units.mtp.fwd.empty() ? 0 : StageMtpModules(l, in.plan.model.mtp_layers, cc.stage);
    cc.embedding = cc.stage == 0;
    cc.head = cc.stage == stages - 1;
    cc.fwd_s = ChunkSum(in.units, cc, &UnitOps::fwd_s);
    cc.bwd_s = ChunkSum(in.units, cc, &UnitOps::bwd_s);
    cc.fwd_tp_s = ChunkSum(in.units, cc, &UnitOps::fwd_tp_s);
    cc.bwd_tp_s = ChunkSum(in.units, cc, &UnitOps::bwd_tp_s);
    rc.fwd_s += cc.fwd_s;
    rc.bwd_s += cc.bwd_s;
    rc.fwd_tp_s += cc.fwd_tp_s;
    rc.bwd_tp_s += cc.bwd_tp_s;
    rc.chunks.push_back(cc);
    if (in.units.layer_kind.empty()) continue;
    for (int64_t i = cc.layers.first; i < cc.layers.end(); ++i) {
      const UnitOps& lu = in.units.Layer(i);
      rc.layer.fwd_s += lu.fwd_s;
      rc.layer.bwd_s += lu.bwd_s;
      rc.layer.fwd_tp_s += lu.fwd_tp_s;
      rc.layer.bwd_tp_s += lu.bwd_tp_s;
      ++layers;
    }
  }
  const UnitOps& u = in.units.layer;
  if (in.units.layer_kind.empty() || layers == 0) {
    rc.layer = {u.fwd_s, u.bwd_s, u.fwd_tp_s, u.bwd_tp_s};
  } else {
    const double n = static_cast<double>(layers);
    rc.layer = {rc.layer.fwd_s / n, rc.layer.bwd_s / n, rc.layer.fwd_tp_s / n, rc.layer.bwd_tp_s / n};
  }
  rc.groups = RankParamGroups(in.plan, pp_rank);
  rc.params = TotalParams(rc.groups);
}

void CostSequenceParallelGrads(const CostInputs& in, RankCost& rc) {
  const UnitCosts& u = in.units;
  bool any = !u.layer.grad_sync.empty() || !u.head.grad_sync.empty() || !u.embedding.grad_sync.empty() ||
             !u.mtp.grad_sync.empty();
  for (const UnitOps& kind : u.kinds) any = any || !kind.grad_sync.empty();
  if (!any) return;
  const Layout& l = in.plan.layout;
  double sync_s = 0, sync_bytes = 0;
  for (const ChunkCost& cc : rc.chunks) {
    sync_s += ChunkSum(u, cc, &UnitOps::grad_sync_s);
    sync_bytes += ChunkSum(u, cc, &UnitOps::grad_sync_bytes);
  }
  if (in.ctx.implementation().sp_grad_reduction.value == SpGradReduction::kCoalesced) {
    rc.sp_grad_coalesced_bytes = sync_bytes;
    rc.sp_grad_coalesced_s = in.ctx.collectives().Time(CollectiveKind::kAllReduce, sync_bytes,
                                                       PlaceGroup(l, in.ctx.cluster(), GroupKind::kTp));
  } else if (l.zero_stage >= 2) {
    for (ChunkCost& cc : rc.chunks) {
      const double add = ChunkSum(u, cc, &UnitOps::grad_sync_s);
      cc.bwd_s += add;
      cc.bwd_tp_s += add;
      rc.bwd_s += add;
      rc.bwd_tp_s += add;
    }
  } else {
    rc.sp_grad_last_s = sync_s;
  }
}

void CostGradAccumulation(const CostInputs& in, int64_t microbatches, RankCost& rc) {
  const ImplementationProfile& impl = in.ctx.implementation();
  if (impl.grad_accumulation.value == GradAccumulation::kInGemm) return;
  const ComputeModel& comp = in.ctx.compute();
  const char* family = MemoryFamily(OpKind::kGradAccum, Phase::kComm);
  // Each micro-batch's weight gradients added into the buffer after the backward that makes
  // them (the 16-bit gradient read, the buffer read and written): one pass per layer, and one
  // per pass over the outer groups whose gradient it completes (ParamGroupDef::grad_pass).
  // Autograd's accumulation (kAfterFirst) takes the first micro-batch's gradient as it is: the
  // simulator skips micro-batch 0, the per-micro-batch chunk time carries (M-1)/M of a pass.
  const double per_param = in.param_e + 2.0 * static_cast<double>(GradBufferBytes(in.plan.training.precision, impl));
  rc.accum_layer_bytes = per_param * in.layer_params;
  rc.accum_layer_s = NoisyMemoryTime(comp, family, rc.accum_layer_bytes);
  for (const ParamGroupDef& g : rc.groups) {
    if (g.kind == ParamGroupKind::kLayer || g.kind == ParamGroupKind::kExperts) continue;
    double& bytes = g.grad_pass == ChunkPass::kEmbedding ? rc.accum_embedding_bytes : rc.accum_head_bytes;
    bytes += per_param * static_cast<double>(g.params);
  }
  rc.accum_embedding_s = rc.accum_embedding_bytes > 0 ? NoisyMemoryTime(comp, family, rc.accum_embedding_bytes) : 0.0;
  rc.accum_head_s = rc.accum_head_bytes > 0 ? NoisyMemoryTime(comp, family, rc.accum_head_bytes) : 0.0;
  const double mbs = static_cast<double>(microbatches);
  const double share = impl.grad_accumulation.value == GradAccumulation::kAfterFirst ? (mbs - 1.0) / mbs : 1.0;
  for (ChunkCost& cc : rc.chunks) {
    const double add = share * (static_cast<double>(cc.units()) * rc.accum_layer_s +
                                (cc.embedding ? rc.accum_embedding_s : 0.0) + (cc.head ? rc.accum_head_s : 0.0));
    cc.bwd_s += add;
    rc.bwd_s += add;
  }
}

void CostOptimizerStep(const CostInputs& in, RankCost& rc) {
  const Layout& l = in.plan.layout;
  const ComputeModel& comp = in.ctx.compute();
  const ZeroSharding sharded = ZeroShardingFor(l.zero_stage);
  // AdamW: mixed reads grad 2 + master 4 + m 4 + v 4, writes master, m, v and the 16-bit copy
  // (28 B/param); fp32 reads 4 x 4 and writes 3 x 4 (28 B/param). Grad-norm reads the grads once.
  const int64_t ranks = DenseReductionRanks(l);
  double shard = static_cast<double>(rc.params) / static_cast<double>(sharded.optimizer ? ranks : 1);
  double grad_shard = static_cast<double>(rc.params) / static_cast<double>(sharded.gradients ? ranks : 1);
  if (in.plan.model.moe()) {  // experts shard over their own group
    shard = OptimizerShardParams(l, rc.groups, sharded.optimizer);
    grad_shard = OptimizerShardParams(l, rc.groups, sharded.gradients);
  }
  const double adam_bytes = OptimizerBytesPerParam(in.ctx.implementation(), in.plan.training.precision, l.zero_stage);
  rc.grad_zero_step_bytes = 4.0 * grad_shard;
  rc.grad_zero_step_s = NoisyMemoryTime(comp, MemoryFamily(OpKind::kGradZero, Phase::kComm), rc.grad_zero_step_bytes);
  rc.optimizer_s = NoisyMemoryTime(comp, "optimizer", adam_bytes * shard);
  // fp8: the updated weights' FP8 copies and transposes, cast once per step before the first
  // micro-batch's forward (Transformer Engine's weight cache): read 2 B, write 1 + 1 B per layer
  // parameter, i.e. twice the bytes the copies hold.
  if (const int64_t copies = CopiesOfRank(in, rc); copies > 0) {
    rc.optimizer_s += NoisyMemoryTime(comp, "fp8_weight_cast", 2.0 * static_cast<double>(copies));
  }
  rc.grad_norm_s = NoisyMemoryTime(comp, "grad_clip", in.grad_e * grad_shard);
}

void CostGradNormSync(const CostInputs& in, PlanCosts& pc) {
  const Layout& l = in.plan.layout;
  PlacedGroup world;
  world.size = l.world_size();
  world.gpus_per_node = in.ctx.cluster().gpus_per_node;
  world.ranks_per_node = std::min(world.size, in.ctx.cluster().domain_size());
  world.nodes = (world.size + world.ranks_per_node - 1) / world.ranks_per_node;
  pc.clip_sync_s = in.ctx.collectives().Time(CollectiveKind::kAllReduce, 4.0, world);
  // System noise at the step's one world-wide synchronization (the grad-norm all-reduce): each TP
  // group arrives late by what its ranks' detours added over the step's compute (within a TP group
  // every TP collective has already waited for its latest rank), and all wait for the latest group.
  const ComputeModel& comp = in.ctx.compute();
  if (!comp.noise().measured()) return;
  double step_compute = 0;
  for (const RankCost& rc : pc.ranks) {
    step_compute = std::max(step_compute, static_cast<double>(pc.microbatches) * (rc.fwd_s + rc.bwd_s) + rc.grad_norm_s);
  }
  pc.clip_sync_noise_s = comp.noise().SyncExcess(step_compute, l.dp * l.cp * l.pp);
  pc.clip_sync_s += pc.clip_sync_noise_s;
}

}  // namespace parallax::planner
