#include "planner/memory/memory_model.h"

#include <algorithm>

#include "model/counting.h"
#include "model/param_groups.h"
#include "model/stage_split.h"
#include "model/rank_groups.h"

namespace parallax::planner {
namespace {

struct StateBytes {
  int64_t weight = 2, grad = 2, optim = 12;
  int64_t step_grad = 0;  //!< the fp32 copy of a 16-bit gradient, alive only around the optimizer step
};

//! Megatron-LM docs/source/api-guide/distributed_optimizer.md: 16-bit weights (2), fp32 or 16-bit
//! gradient buffer (4 / 2, the profile's), fp32 main weights + Adam m and v (12); fp32 training
//! 4 + 4 + 8 (no separate main copy). A 16-bit gradient buffer adds the fp32 copy of the shard's
//! gradient the optimizer steps on (4 more: the table's "fp16 parameters, fp16 gradients" row,
//! 20 / 4 + 16/d; megatron/core/optimizer/distrib_optimizer.py _copy_model_grads_to_main_grads,
//! shard_model_grad.float()). That copy lives from the step to the next iteration's
//! optimizer.zero_grad(set_to_none=True), which megatron/training/training.py train_step calls
//! before the forward passes: it never coexists with the activations (EstimateRankMemory).
//! The profile's optimizer_state_bytes replace the 12 (Megatron-Core's precision-aware optimizer:
//! bf16 moments, 8), and an optimizer that steps on the 16-bit buffer itself
//! (optimizer_reads_grad_buffer: --main-grads-dtype bf16) makes no fp32 copy; both with the
//! distributed optimizer only (OptimizerStateBytes, OptimizerReadsGradBuffer).
StateBytes BytesPerParam(Precision p, const ImplementationProfile& impl, int64_t zero_stage) {
  if (p == Precision::kFp32) return {4, 4, 8, 0};
  const bool fp32_grads = impl.grad_buffer_dtype.value == GradDType::kFp32;
  const bool copy = !fp32_grads && !OptimizerReadsGradBuffer(impl, zero_stage);
  return {2, fp32_grads ? 4 : 2, OptimizerStateBytes(impl, zero_stage), copy ? 4 : 0};
}

int64_t SeqLen(const Plan& p) { return p.training.seq_len > 0 ? p.training.seq_len : p.model.seq_len; }

}  // namespace

int64_t GradBufferBytes(Precision p, const ImplementationProfile& impl) { return BytesPerParam(p, impl, 0).grad; }
int64_t GradReduceBytes(Precision p, const ImplementationProfile& impl) {
  return p == Precision::kFp32 || impl.grad_reduce_dtype.value == GradDType::kFp32 ? 4 : 2;
}

int64_t RankParams(const ModelSpec& m, const Layout& l, int64_t pp_rank) {
  static const ImplementationProfile kAny = DefaultImplementation();  // parameters do not depend on it
  return TotalParams(RankParamGroups(m, l, kAny, Precision::kBf16, pp_rank));
}

std::vector<int64_t> InFlightPerChunk(ScheduleKind kind, int64_t pp, int64_t pp_rank, int64_t microbatches,
                                      int64_t virtual_stages) {
  const int64_t m = microbatches;
  if (kind == ScheduleKind::kGpipe) return std::vector<int64_t>(static_cast<size_t>(virtual_stages), m);
  if (kind == ScheduleKind::kOneFOneB) {
    std::vector<int64_t> out(static_cast<size_t>(virtual_stages), 0);
    out[0] = std::min(pp - pp_rank, m);
    return out;
  }
  // Interleaved: Megatron's warm-up forwards, then one more before the first backward.
  const int64_t v = virtual_stages;
  const int64_t total = m * v;
  int64_t warmup = (pp - pp_rank - 1) * 2 + (v - 1) * pp;
  if (m == pp) warmup = total;
  const int64_t peak = std::min(warmup + 1, total);
  std::vector<int64_t> out(static_cast<size_t>(v), 0);
  // Forward k runs chunk (k % (pp v)) / pp: whole rounds of pp*v give pp to every chunk.
  const int64_t rounds = peak / (pp * v);
  for (auto& n : out) n = rounds * pp;
  for (int64_t k = rounds * pp * v; k < peak; ++k) ++out[static_cast<size_t>((k % (pp * v)) / pp)];
  return out;
}

MemoryBreakdown EstimateRankMemory(const Plan& plan, int64_t pp_rank) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  const StateBytes sb = BytesPerParam(plan.training.precision, plan.implementation, plan.layout.zero_stage);
  const int64_t e = BytesPerElement(plan.training.precision);
  // Dense groups shard over dp x cp, routed experts over the expert data-parallel group (model/param_groups.h).
  int64_t phi = 0, phi_experts = 0;
  for (const ParamGroupDef& g : RankParamGroups(plan, pp_rank)) {
    (g.reduced_over == ReductionGroup::kExpertDp ? phi_experts : phi) += g.params;
  }
  const int64_t dp = DenseReductionRanks(l), edp = ReductionGroupSize(l, ReductionGroup::kExpertDp);
  auto shard = [&](int64_t bytes, bool sharded, int64_t n) { return sharded ? (bytes + n - 1) / n : bytes; };
  // `per_param` bytes of every parameter, dense ones over dp and experts over edp when `sharded`.
  auto state = [&](int64_t per_param, bool sharded) {
    return shard(per_param * phi, sharded, dp) + shard(per_param * phi_experts, sharded, edp);
  };
  const ZeroSharding sharded = ZeroShardingFor(l.zero_stage);

  MemoryBreakdown r;
  r.weights = state(sb.weight, sharded.weights);
  r.gradients = state(sb.grad, sharded.gradients);
  r.optimizer = state(sb.optim, sharded.optimizer);
  const int64_t step_grad = state(sb.step_grad, sharded.optimizer);
  phi += phi_experts;

  ActivationOptions ao;
  ao.micro_batch = l.micro_batch;
  ao.seq_len = SeqLen(plan) / l.cp;  // a cp rank keeps the activations of its s / cp tokens
  ao.tp = l.tp;
  ao.sequence_parallel = l.sequence_parallel;
  ao.recompute = l.recompute;
  ao.selective_modules = l.selective_modules();
  ao.bytes_per_element = e;
  ao = ForImplementation(ao, plan.implementation, plan.training.precision);
  const int64_t per_layer = ActivationBytesPerLayer(m, ao);
  // Layers differ (dense and MoE layers, local and global attention): each counted on its own.
  const bool uniform = !m.moe() && m.attention_window == 0;
  const int64_t stages = ModelStages(l);
  const int64_t mb = std::max<int64_t>(l.num_microbatches(), 1);
  const auto in_flight = InFlightPerChunk(l.schedule, l.pp, pp_rank, mb, l.virtual_stages);
  int64_t max_chunk_layers = 0;
  for (int64_t chunk = 0; chunk < l.virtual_stages; ++chunk) {
    const int64_t stage = ModelStage(l.pp, pp_rank, chunk);
    const int64_t layers = StageLayers(l, m.layers, stage).count;
    max_chunk_layers = std::max(max_chunk_layers, layers);
    int64_t bytes = layers * per_layer;
    if (!uniform) {
      const LayerRange range = StageLayers(l, m.layers, stage);
      bytes = 0;
      for (int64_t i = range.first; i < range.end(); ++i) bytes += ActivationBytesOfLayer(m, i, ao, l.expert_tp());
    }
    if (stage == 0) bytes += EmbeddingActivationBytes(m, ao);
    if (stage == stages - 1) bytes += HeadActivationBytes(m, ao);
    bytes += StageMtpModules(l, m.mtp_layers, stage) * MtpActivationBytes(m, ao, l.expert_tp());
    r.activations += in_flight[static_cast<size_t>(chunk)] * bytes;
  }
  // Full/selective recompute re-materialises one layer at a time during backward. Without virtual
  // stages, the micro-batch whose layers recompute has been through the loss backward on this rank
  // first (last stage), which freed its head activations: the two never live together.
  if (l.recompute != Recompute::kNone && max_chunk_layers > 0) {
    const int64_t working = RecomputeWorkingBytes(m, ao);
    const bool last = pp_rank == l.pp - 1 && l.virtual_stages == 1;
    r.activations += last ? std::max<int64_t>(0, working - HeadActivationBytes(m, ao)) : working;
  }

  r.weights += Fp8WeightCopyBytes(plan, pp_rank);
  const int64_t sbh = ao.seq_len * l.micro_batch * m.hidden;
  int64_t transient = 2 * e * sbh;  // activation gradient in/out of the layer being differentiated
  const int64_t layer_params = LayerParamsPerTpRank(m, l.tp);
  if (sharded.weights) {
    // The layer computing and those gathered ahead of it (ParamGroupDef::prefetch_ahead).
    const int64_t held = 1 + LayerPrefetchAhead(plan.implementation);
    transient += held * sb.weight * layer_params;
  }
  // ZeRO-2/3 reduce-scatter per bucket: the unsharded gradients of the buckets in flight and of
  // the next one (kReduceScattersInFlight); the bucket is the implementation's (DpBucketBytes: a
  // whole layer for our executor), never above the rank's whole gradient.
  if (sharded.gradients && dp > 1) {
    const int64_t layer_grad = sb.grad * layer_params;
    const int64_t buckets = kReduceScattersInFlight + 1;
    transient += std::min(buckets * DpBucketBytes(plan.implementation, layer_grad), sb.grad * phi);
  }
  transient += UnfusedAttentionWorkspaceBytes(plan);
  transient += MoeDispatchWorkspaceBytes(plan);
  transient += MlaWideningWorkspaceBytes(plan);
  // The optimizer step's fp32 gradient copy (BytesPerParam) takes the place of the freed
  // activations and transients: the peak holds whichever is larger.
  const int64_t step_over = std::max<int64_t>(0, step_grad - (r.activations + transient));
  r.optimizer += step_over;
  const int64_t modelled = r.weights + r.gradients + r.optimizer + r.activations;
  r.workspace = transient + static_cast<int64_t>(kAllocatorMargin * static_cast<double>(modelled));
  r.reserve = RuntimeReserveBytes(plan);
  r.total = modelled + r.workspace + r.reserve;
  return r;
}

int64_t MoeDispatchWorkspaceBytes(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  if (!m.moe()) return 0;
  // The all-to-all's send buffer of the permuted tokens (k copies of the rank's tokens, h wide) lives
  // beside the receive buffer the layer keeps (MoeActivationBytes), in forward and again in backward.
  const int64_t tokens = SeqLen(plan) * l.micro_batch / (l.sequence_parallel ? l.tp : 1) * l.expert_tp();
  const double load = std::max(1.0, l.routing.LoadFactor());
  return static_cast<int64_t>(load * static_cast<double>(m.experts_per_token * tokens * m.hidden *
                                                         BytesPerElement(plan.training.precision)));
}

int64_t MlaWideningWorkspaceBytes(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  if (!m.mla() || m.value_dim() >= m.head_dim()) return 0;
  const int64_t tokens = SeqLen(plan) / l.cp * l.micro_batch;
  return 2 * tokens * (m.heads / l.tp) * m.head_dim() * BytesPerElement(plan.training.precision);
}

int64_t Fp8WeightCopyBytes(const Plan& plan, int64_t pp_rank) {
  // FP8 parameters: the 1 B data and its 1 B transpose take the 16-bit weight's 2 B (counted).
  if (plan.training.precision != Precision::kFp8 || plan.implementation.fp8_params.value) return 0;
  const Layout& l = plan.layout;
  if (plan.model.moe()) {
    // An MoE layer's copies cover the rank's own experts (experts / ep, split over etp), not all of them.
    int64_t params = 0;
    for (const ParamGroupDef& g : RankParamGroups(plan, pp_rank)) {
      if (g.kind == ParamGroupKind::kLayer || g.kind == ParamGroupKind::kExperts) params += g.params;
    }
    return 2 * params;
  }
  int64_t layers = 0;
  for (int64_t chunk = 0; chunk < l.virtual_stages; ++chunk) {
    layers += StageLayers(l, plan.model.layers, ModelStage(l.pp, pp_rank, chunk)).count;
  }
  // Every parameter of the layer (norms too: an upper bound), 1 B for the copy and 1 B for its
  // transpose, held whole even under ZeRO-3 (also an upper bound).
  return 2 * layers * LayerParamsPerTpRank(plan.model, l.tp);
}

int64_t UnfusedAttentionWorkspaceBytes(const Plan& plan) {
  if (plan.implementation.attention.value != AttentionKernel::kUnfused) return 0;
  // A CPU device (no SMs): the CPU backend's attention streams blocks of rows through host scratch
  // (executor/cpu/attention_kernels.cpp, O(64 S) floats per thread), never S x S scores.
  if (!plan.cluster.device.is_gpu()) return 0;
  const Layout& l = plan.layout;
  const int64_t s = SeqLen(plan) / l.cp;  // one cp block's scores: its s / cp queries and keys at most
  const int64_t chunk = UnfusedAttentionChunkItems(s, l.micro_batch * std::max<int64_t>(plan.model.kv_heads / l.tp, 1));
  return chunk * s * s * (4 + BytesPerElement(plan.training.precision));
}

int64_t RuntimeReserveBytes(const Plan& plan) {
  const Microarch& a = plan.cluster.device.arch;
  const Layout& l = plan.layout;
  constexpr double kMiB = 1024.0 * 1024.0;
  // Communicators this rank joins: TP, DP, the two pipeline neighbours, the world (grad-norm); with
  // context parallelism the cp and dp x cp groups too.
  int64_t comms = (l.tp > 1 ? 1 : 0) + (l.dp > 1 ? 1 : 0) + (l.pp > 1 ? 2 : 0) + (l.world_size() > 1 ? 1 : 0) +
                  (l.cp > 1 ? 2 : 0);
  const double nccl = static_cast<double>(comms * a.nccl_channels * 2) * kNcclBuffMiB;  // send + recv per channel
  return static_cast<int64_t>((a.context_reserve_MiB + a.blas_workspace_MiB + nccl) * kMiB);
}

int64_t PeakMemoryBytes(const Plan& plan) {
  int64_t peak = 0;
  for (int64_t r = 0; r < plan.layout.pp; ++r) peak = std::max(peak, EstimateRankMemory(plan, r).total);
  return peak;
}

}  // namespace parallax::planner
