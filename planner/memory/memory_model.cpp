#include "planner/memory/memory_model.h"

#include <algorithm>

#include "model/counting.h"
#include "planner/cost/stage_partition.h"

namespace parallax::planner {
namespace {

//! Largest gradient bucket (PyTorch DDP's default bucket_cap_mb = 25); ZeRO-2/3 keep two in flight.

int64_t LayerParams(const ModelSpec& m, const ModelCounts& c, int64_t tp) {
  // Column/row-parallel weights and column biases split; norms and row-parallel biases replicated.
  const int64_t replicated = 2 * NormParams(m) + (m.bias ? 2 * m.hidden : 0);
  return (c.params_per_layer - replicated) / tp + replicated;
}

struct StateBytes {
  int64_t weight = 2, grad = 2, optim = 12;
};

//! Megatron-LM docs/source/api-guide/distributed_optimizer.md: 16-bit weights (2), fp32 or 16-bit
//! gradient buffer (4 / 2, the profile's), fp32 main weights + Adam m and v (12); fp32 training
//! 4 + 4 + 8 (no separate main copy).
StateBytes BytesPerParam(Precision p, const ImplementationProfile& impl) {
  if (p == Precision::kFp32) return {4, 4, 8};
  return {2, impl.grad_buffer_dtype.value == GradDType::kFp32 ? 4 : 2, 12};
}

int64_t SeqLen(const Plan& p) { return p.training.seq_len > 0 ? p.training.seq_len : p.model.seq_len; }

}  // namespace

int64_t LayerParamsPerTpRank(const ModelSpec& m, int64_t tp) { return LayerParams(m, CountModel(m), tp); }

int64_t GradBufferBytes(Precision p, const ImplementationProfile& impl) { return BytesPerParam(p, impl).grad; }
int64_t GradReduceBytes(Precision p, const ImplementationProfile& impl) {
  return p == Precision::kFp32 || impl.grad_reduce_dtype.value == GradDType::kFp32 ? 4 : 2;
}

int64_t RankParams(const ModelSpec& m, const Layout& l, int64_t pp_rank) {
  const ModelCounts c = CountModel(m);
  const int64_t stages = ModelStages(l);
  int64_t layers = 0;
  for (int64_t chunk = 0; chunk < l.virtual_stages; ++chunk) {
    layers += StageLayers(m.layers, stages, ModelStage(l.pp, pp_rank, chunk)).count;
  }
  int64_t params = layers * LayerParams(m, c, l.tp);
  for (const OuterParamGroup& g : OuterParamGroups(m, l, pp_rank)) params += g.params;
  return params;
}

std::vector<OuterParamGroup> OuterParamGroups(const ModelSpec& m, const Layout& l, int64_t pp_rank) {
  const ModelCounts c = CountModel(m);
  const int64_t word_embedding = m.vocab * m.hidden / l.tp;  // vocab-parallel
  std::vector<OuterParamGroup> out;
  if (pp_rank == 0) {
    // With one stage a tied LM head uses the word embedding itself.
    out.push_back({true, m.tie_embeddings && l.pp == 1, word_embedding});
    const int64_t positions = c.params_embedding - m.vocab * m.hidden;
    if (positions > 0) out.push_back({true, false, positions});
  }
  if (pp_rank == l.pp - 1) {
    out.push_back({false, true, c.params_final_norm + (m.tie_embeddings ? 0 : word_embedding)});
    // Megatron's copy of the tied word embedding on the last stage when pp > 1.
    if (m.tie_embeddings && l.pp > 1) out.push_back({false, true, word_embedding});
  }
  return out;
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
  const StateBytes sb = BytesPerParam(plan.training.precision, plan.implementation);
  const int64_t e = BytesPerElement(plan.training.precision);
  const int64_t phi = RankParams(m, l, pp_rank);
  const int64_t dp = l.dp;
  auto shard = [&](int64_t bytes, bool sharded) { return sharded ? (bytes + dp - 1) / dp : bytes; };

  MemoryBreakdown r;
  r.weights = shard(sb.weight * phi, l.zero_stage >= 3);
  r.gradients = shard(sb.grad * phi, l.zero_stage >= 2);
  r.optimizer = shard(sb.optim * phi, l.zero_stage >= 1);

  ActivationOptions ao;
  ao.micro_batch = l.micro_batch;
  ao.seq_len = SeqLen(plan);
  ao.tp = l.tp;
  ao.sequence_parallel = l.sequence_parallel;
  ao.recompute = l.recompute;
  ao.bytes_per_element = e;
  ao = ForImplementation(ao, plan.implementation);
  const int64_t per_layer = ActivationBytesPerLayer(m, ao);
  const int64_t stages = ModelStages(l);
  const int64_t mb = std::max<int64_t>(l.num_microbatches(), 1);
  const auto in_flight = InFlightPerChunk(l.schedule, l.pp, pp_rank, mb, l.virtual_stages);
  int64_t max_chunk_layers = 0;
  for (int64_t chunk = 0; chunk < l.virtual_stages; ++chunk) {
    const int64_t stage = ModelStage(l.pp, pp_rank, chunk);
    const int64_t layers = StageLayers(m.layers, stages, stage).count;
    max_chunk_layers = std::max(max_chunk_layers, layers);
    int64_t bytes = layers * per_layer;
    if (stage == 0) bytes += EmbeddingActivationBytes(m, ao);
    if (stage == stages - 1) bytes += HeadActivationBytes(m, ao);
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

  const int64_t sbh = ao.seq_len * l.micro_batch * m.hidden;
  int64_t transient = 2 * e * sbh;  // activation gradient in/out of the layer being differentiated
  if (l.zero_stage >= 3) {
    const ModelCounts c = CountModel(m);
    // The layer computing and those gathered ahead of it (the profile's zero3_prefetch_layers).
    const int64_t held = 1 + std::max<int64_t>(plan.implementation.zero3_prefetch_layers.value, 0);
    transient += held * sb.weight * LayerParams(m, c, l.tp);
  }
  // ZeRO-2/3 reduce-scatter per bucket: the unsharded gradient of the bucket being reduced and of
  // the next one (double buffering); the bucket is the implementation's (DpBucketBytes: a whole
  // layer for our executor), never above the rank's whole gradient.
  if (l.zero_stage >= 2 && dp > 1) {
    const int64_t layer_grad = sb.grad * LayerParams(m, CountModel(m), l.tp);
    transient += std::min(2 * DpBucketBytes(plan.implementation, layer_grad), sb.grad * phi);
  }
  transient += UnfusedAttentionWorkspaceBytes(plan);
  const int64_t modelled = r.weights + r.gradients + r.optimizer + r.activations;
  r.workspace = transient + static_cast<int64_t>(kAllocatorMargin * static_cast<double>(modelled));
  r.reserve = RuntimeReserveBytes(plan);
  r.total = modelled + r.workspace + r.reserve;
  return r;
}

int64_t UnfusedAttentionWorkspaceBytes(const Plan& plan) {
  if (plan.implementation.attention.value != AttentionKernel::kUnfused) return 0;
  // A CPU device (no SMs): the CPU backend's attention streams blocks of rows through host scratch
  // (executor/cpu/attention_kernels.cpp, O(64 S) floats per thread), never S x S scores.
  if (!plan.cluster.device.is_gpu()) return 0;
  const Layout& l = plan.layout;
  const int64_t s = SeqLen(plan);
  const int64_t chunk = UnfusedAttentionChunkItems(s, l.micro_batch * std::max<int64_t>(plan.model.kv_heads / l.tp, 1));
  return chunk * s * s * (4 + BytesPerElement(plan.training.precision));
}

int64_t RuntimeReserveBytes(const Plan& plan) {
  const Microarch& a = plan.cluster.device.arch;
  const Layout& l = plan.layout;
  constexpr double kMiB = 1024.0 * 1024.0;
  // Communicators this rank joins: TP, DP, the two pipeline neighbours, the world (grad-norm).
  int64_t comms = (l.tp > 1 ? 1 : 0) + (l.dp > 1 ? 1 : 0) + (l.pp > 1 ? 2 : 0) + (l.world_size() > 1 ? 1 : 0);
  const double nccl = static_cast<double>(comms * a.nccl_channels * 2) * kNcclBuffMiB;  // send + recv per channel
  return static_cast<int64_t>((a.context_reserve_MiB + a.blas_workspace_MiB + nccl) * kMiB);
}

int64_t PeakMemoryBytes(const Plan& plan) {
  int64_t peak = 0;
  for (int64_t r = 0; r < plan.layout.pp; ++r) peak = std::max(peak, EstimateRankMemory(plan, r).total);
  return peak;
}

}  // namespace parallax::planner
