#pragma once
// Peak device memory of one rank (DESIGN.md "Memory"). Used by the search to prune layouts and
// by the executor's memory-truth test; a plan called feasible must not run out of memory.
//
// Model states per parameter of this rank's shard (Megatron-LM docs/source/api-guide/
// distributed_optimizer.md; Rajbhandari et al., ZeRO, SC'20, section 3.1):
//   mixed precision (bf16/fp16): 2 B weights + 4 B fp32 gradient buffer + 12 B optimizer
//                                (4 fp32 main weights + 8 Adam): 18 B, 6 + 12/dp with ZeRO-1;
//                                where the profile keeps 16-bit gradients (megatron-2021/2022,
//                                deepspeed, nemo) 2 B gradients + 16 B optimizer (the fp32 copy of
//                                the gradient it steps on too): 20 B, 4 + 16/dp with ZeRO-1
//   fp32:                        4 B weights + 4 B gradients +  8 B optimizer (Adam, no main copy)
// ZeRO-1 shards the optimizer over dp, ZeRO-2 also the gradients, ZeRO-3 also the weights
// (model/param_groups.h ZeroShardingFor).
// On top: the runtime reserve (RuntimeReserveBytes), so the total is an upper bound of what the
// device shows in use.
// Activations: Korthikanti et al. 2022 per layer and micro-batch (model/counting.h), times the
// micro-batches in flight on the rank under its schedule (InFlightPerChunk).

#include <cstdint>
#include <vector>

#include "model/param_groups.h"
#include "model/plan.h"

namespace parallax::planner {

struct MemoryBreakdown {
  int64_t weights = 0;
  int64_t gradients = 0;
  int64_t optimizer = 0;
  int64_t activations = 0;  //!< kept activations of all in-flight micro-batches + recompute working set
  int64_t workspace = 0;    //!< transient buffers (logit grads, ZeRO-3 gathers, DP buckets) + allocator margin
  int64_t reserve = 0;      //!< outside the allocator: CUDA context, cuBLAS workspace, NCCL buffers
  int64_t total = 0;
};

//! Peak bytes of pipeline rank `pp_rank` (0..pp-1); every tp/dp rank of a stage holds the same.
MemoryBreakdown EstimateRankMemory(const Plan& plan, int64_t pp_rank);
//! Device memory outside the caching allocator (0 on a device without microarch, e.g. the CPU):
//! the CUDA context, one cuBLAS workspace, and per NCCL communicator the send and receive buffers
//! of each channel (NCCL_BUFFSIZE). Sources in model/presets.cpp and below.
int64_t RuntimeReserveBytes(const Plan& plan);
//! Scores of an unfused attention kernel live while it runs (executor/cuda/cuda_kernels.cpp,
//! AttentionForward/Backward): fp32 scores (then dP) for a chunk of (sequence, kv head) items
//! (UnfusedAttentionChunkItems, model/implementation.h), plus P / dS of the chunk in the
//! activations' dtype. 0 for a flash-attention profile and on a CPU device (no SMs).
int64_t UnfusedAttentionWorkspaceBytes(const Plan& plan);
//! An MoE layer's all-to-all send buffer (k permuted copies of the rank's tokens, times the routing's
//! load factor), transient beside the kept receive buffer; 0 for a dense model.
int64_t MoeDispatchWorkspaceBytes(const Plan& plan);
//! Multi-head latent attention with v_head_dim below the query width: its values and attention output
//! widened to that width (zero-padded) around the attention core's backward, beside the narrow
//! copies the layer keeps (executor/runtime/mla_attention.cpp); 0 otherwise.
int64_t MlaWideningWorkspaceBytes(const Plan& plan);
//! Under the fp8 precision, the FP8 copies of the rank's layer weights and their transposes that
//! Transformer Engine caches over a step's micro-batches (the forward GEMM reads W, the input-gradient
//! GEMM W^T), counted with the weights; 0 otherwise, and 0 under the profile's fp8_params (the FP8
//! data and transpose replace the 16-bit weights). The activations stay counted in bf16 although TE
//! saves FP8 copies of the linear layers' inputs: the memory model stays an upper bound.
int64_t Fp8WeightCopyBytes(const Plan& plan, int64_t pp_rank);
//! NCCL_BUFFSIZE default: 4 MiB per channel and direction (NCCL docs, Environment Variables).
inline constexpr double kNcclBuffMiB = 4.0;
//! Max of EstimateRankMemory(plan, r).total over the pipeline ranks.
int64_t PeakMemoryBytes(const Plan& plan);

//! Parameters held by one TP rank of pipeline rank `pp_rank` before ZeRO sharding: the sum over
//! its parameter groups (model/param_groups.h RankParamGroups).
int64_t RankParams(const ModelSpec& m, const Layout& l, int64_t pp_rank);
using parallax::LayerParamsPerTpRank;
//! Bytes per element of the gradient buffer: fp32 training 4; 16-bit training the profile's
//! grad_buffer_dtype (fp32 main_grad 4, else 2).
int64_t GradBufferBytes(Precision p, const ImplementationProfile& impl);
//! Bytes per element of the DP gradient reduction on the wire: fp32 training 4; 16-bit training the
//! profile's grad_reduce_dtype (fp32 main_grad 4, else the 16-bit gradient's 2).
int64_t GradReduceBytes(Precision p, const ImplementationProfile& impl);

//! Micro-batches whose forward activations chunk c of pipeline rank `pp_rank` holds at the peak
//! of the schedule (GPipe: all; 1F1B: pp - pp_rank; interleaved: Megatron's warm-up + 1, spread
//! over chunks in schedule order). Index = chunk.
std::vector<int64_t> InFlightPerChunk(ScheduleKind kind, int64_t pp, int64_t pp_rank, int64_t microbatches,
                                      int64_t virtual_stages);

//! Allocator fragmentation margin as a fraction of the modelled bytes. What a caching allocator
//! wastes: PyTorch's rounds requests above 1 MiB to 2 MiB and packs 1-10 MiB ones into 20 MiB blocks
//! (c10/cuda/CUDACachingAllocator.cpp, kRoundLarge, kLargeBuffer); GMLake (Guo et al., ASPLOS'24)
//! measured 15% fragmentation on average (up to 33%) for PyTorch's allocator over eight LLM trainings
//! with recompute, ZeRO or offload on A100-80GB. No published figure gives 5%; it is checked for our
//! executor, whose allocator the upper bound is for: predicted / measured peak 1.003-1.104 over the
//! single- and multi-rank memory-truth tests and 1.013-1.128 over the H100 runs of 2026-11-27
//! (README, "Measured results"), the margin included. A Megatron or DeepSpeed run on PyTorch's
//! allocator can fragment more than this margin allows.
inline constexpr double kAllocatorMargin = 0.05;

}  // namespace parallax::planner
