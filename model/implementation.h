#pragma once
// ImplementationProfile: what runs the plan (DESIGN.md "Implementation profiles"). The same layout
// runs at different speeds under Megatron-LM of 2021, Megatron-Core with Transformer Engine,
// DeepSpeed ZeRO or our own executor; a profile states the facts that make the difference, each
// with its source. Device physics and measured costs are shared by all profiles.
//
// File form (kind "implementation"): {"kind":"implementation","version":1,"name":...,
//   "base": "megatron-core" (optional: start from a preset), "description": ...,
//   "facts": {"attention": {"value": "flash", "source": "..."}, ...}}
// Every fact is an object with "value" and "source"; unknown keys are errors.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/json_io.h"

namespace parallax {

//! Attention core kernel: unfused = QK^T GEMM, fused scale-mask-softmax (+ dropout), AV GEMM with
//! the s x s scores in HBM (Megatron-LM 2021); flash = one tiled kernel, scores never leave the SM
//! (Dao et al. 2022/2023; cuDNN fused attention in Transformer Engine), causal blocks skipped.
enum class AttentionKernel { kUnfused, kFlash };
//! Element type of the DP gradient buffer and of the gradient reduction.
enum class GradDType { kFp32, kParam };  //!< kParam: the 16-bit compute type (2 B)
//! DP collective: NCCL over the whole group (ring or tree, as NCCL picks) or hierarchical
//! (intra-node reduce-scatter, inter-node collective on 1/k, intra-node all-gather).
enum class DpAlgorithm { kNccl, kHierarchical };
//! AdamW implementation: one fused multi-tensor kernel (apex/TE FusedAdam) or one pass per
//! tensor and per moment (torch.optim.AdamW foreach=False).
enum class OptimizerKind { kFusedMultiTensor, kPerTensor };
//! Pipeline send/recv: overlapped with compute (async, batched isend/irecv waited just before
//! use) or blocking (the rank waits for its send to complete before computing on).
enum class P2pSemantics { kAsync, kBlocking };
//! How each micro-batch's weight gradients reach the gradient buffer: inside the weight-gradient
//! GEMM (beta 1 into the buffer: no pass), or by a memory pass of their own on the compute stream
//! (read the 16-bit gradient, read and write the buffer) after every micro-batch's backward (a
//! main_grad.add_ hook) or after every one but the first (autograd's accumulation into param.grad,
//! which takes the first gradient as it is).
enum class GradAccumulation { kInGemm, kEveryMicrobatch, kAfterFirst };
//! How the vocab-parallel cross-entropy combines its TP shards: all-reduces between its passes (the
//! row max, then the target logits and sums of exponentials: Megatron-LM), or one all-gather of each
//! shard's statistics from a single pass (its own row max, the sum of exponentials relative to it,
//! the target logit), combined when the loss backward starts (our executor).
enum class LossReduction { kAllReduce, kAllGather };
//! Under sequence parallelism every TP rank holds some parameters whole (norm weights and biases,
//! row-parallel biases, learned positions) but saw only its shard of the sequence, so their
//! gradients are summed over TP: one all-reduce per parameter when its group's gradient is final
//! (our executor), or all of them flattened into one all-reduce after the backward (Megatron).
enum class SpGradReduction { kPerParameter, kCoalesced };
//! How an MoE layer moves tokens to their experts (Megatron-Core --moe-token-dispatcher-type):
//! an all-to-all over the ep group, an all-gather of every token over it (each rank keeps its
//! experts' share; a reduce-scatter combines), or DeepEP's fused all-to-all kernels ("flex").
enum class MoeDispatcher { kAllToAll, kAllGather, kDeepEp };

//! How context parallelism exchanges keys and values (Megatron-Core --cp-comm-type, passed to
//! Transformer Engine's DotProductAttention): p2p, a ring of send/recv of K and V blocks overlapped
//! with the attention of the previous block; all_gather, K and V gathered over the cp group before
//! the attention (Llama 3's); a2a, Ulysses-style all-to-alls that trade the sequence split for a
//! head split; a2a+p2p, a2a inside sub-groups and p2p across them (not modelled). none: the
//! implementation has no context parallelism.
enum class CpCommType { kNone, kP2p, kAllGather, kA2a, kA2aP2p };

//! Transformer Engine's FP8 recipe, by Megatron-Core's --fp8-recipe names: delayed (per-tensor
//! scales from an amax history), tensorwise (per-tensor current scaling), blockwise (1x128
//! activation and 128x128 weight tiles, Hopper) and mxfp8 (32-element blocks with E8M0 scales,
//! Blackwell).
enum class Fp8Recipe { kDelayed, kTensorwise, kBlockwise, kMxfp8 };

template <class T>
struct Fact {
  T value{};
  std::string source;  //!< where the fact comes from (file and line, paper section, docs page)
};

struct ImplementationProfile {
  std::string name;
  std::string description;
  Fact<AttentionKernel> attention;
  //! The attention core keeps the fp32 row log-sum-exp for backward and recomputes the probabilities
  //! there (flash attention always does; our executor's GEMM path too), not the s x s probabilities.
  //! Memory only: what the kernels cost is `attention`'s. Read through AttentionKeepsStatistics.
  Fact<bool> attention_keeps_statistics;
  //! A flash attention core runs Tri Dao's FlashAttention-2 kernels (Transformer Engine with
  //! NVTE_FUSED_ATTN=0 and the flash-attn 2 package), not a fused kernel of the device's generation
  //! (cuDNN's): priced at the device's Microarch::fa2_attention_fraction of that kernel's speed.
  Fact<bool> flash_attention_2;
  //! Q, K and V come from one GEMM against the concatenated weight (bias in its epilogue), not from
  //! three GEMMs each followed by its bias add (and rotary embedding, when the model has one)
  Fact<bool> fused_qkv_gemm;
  Fact<bool> fused_bias_activation;   //!< bias + GeLU / SwiGLU in one kernel
  Fact<bool> fused_bias_dropout_add;  //!< bias + dropout + residual add in one kernel
  //! Dropout is applied where the model asks for it (model "dropout"): its masks are kept for
  //! backward (memory) and written and read (bytes). False: the model flag is ignored.
  Fact<bool> applies_dropout;
  //! The cross-entropy keeps the logits' softmax in fp32 for backward (the 16-bit logits cast up
  //! first), each of its steps a pass of its own over the fp32 logits (Megatron's torch sequence:
  //! the op catalogue prices 38 / 14 B per logit in 16-bit training); false: our fused kernels, the
  //! logits and their gradient in the compute dtype.
  Fact<bool> fp32_cross_entropy;
  Fact<LossReduction> loss_reduction;
  Fact<SpGradReduction> sp_grad_reduction;
  //! The residual join after the attention output projection (bias + residual add) runs inside the
  //! MLP norm's kernel (one pass: read both, write the sum and the normalized rows), not after the GEMM
  Fact<bool> residual_join_in_norm;
  Fact<GradDType> grad_buffer_dtype;  //!< what the DP gradient buffer holds (memory)
  Fact<GradDType> grad_reduce_dtype;  //!< what the DP reduction sends (communication)
  Fact<DpAlgorithm> dp_algorithm;
  Fact<int64_t> dp_bucket_MiB;        //!< gradient bucket size (reduction granularity, staging memory)
  Fact<int64_t> zero3_prefetch_layers;  //!< ZeRO-3: layers gathered ahead of the one computing (0: none)
  //! ZeRO-3: parameters gathered ahead of use at most (0: whole layers). A layer larger than this
  //! has the rest of its parameters gathered when it is reached, and the compute waits for them.
  Fact<int64_t> zero3_prefetch_params;
  //! The highest ZeRO stage the implementation runs (0: plain data parallelism; 1: optimizer state
  //! sharded, Megatron's distributed optimizer; 3: parameters too). The search enumerates no more.
  Fact<int64_t> max_zero_stage;
  //! The highest ZeRO stage it runs together with pipeline parallelism (pp > 1).
  Fact<int64_t> max_zero_stage_pipelined;
  //! Transformer Engine userbuffers: the sequence-parallel collectives overlap the linears next to
  //! them by TE's default method per GEMM (planner/cost/layer_ops.cpp OverlapAsUserbuffers)
  Fact<bool> overlap_tp_comm;
  //! Only the column-parallel linears' backward collectives run asynchronously under that linear's
  //! own GEMMs (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication): the
  //! input-gradient all-reduce (sequence parallel: reduce-scatter) under the weight-gradient GEMM,
  //! the sequence-parallel re-gather of the input under the input-gradient GEMM. Forward and
  //! row-parallel collectives stay on the critical path. Implied by overlap_tp_comm.
  Fact<bool> async_tp_backward;
  Fact<GradAccumulation> grad_accumulation;
  Fact<bool> overlap_dp_reduce;       //!< DP gradient reduction overlaps backward
  //! ZeRO-1/2: the parameter all-gather after the optimizer step runs under the next step's first
  //! forward, each chunk's units waiting for their parameters (ZeRO-3's gathers: zero3_prefetch_layers)
  Fact<bool> overlap_param_gather;
  Fact<double> launch_overhead_us;    //!< host time to launch one kernel (floor on a kernel's time)
  Fact<OptimizerKind> optimizer;
  //! A 16-bit run's optimizer wrapper makes passes of its own around the fused Adam, each over the
  //! rank's optimizer shard (planner::MixedPrecisionPassBytes): the main gradients cast to fp32
  //! when their buffer is 16-bit, unscaled and checked for inf/nan under fp16 loss scaling, and the
  //! updated fp32 master weights copied to the 16-bit model weights. False: the optimizer kernel
  //! reads the gradients in their buffer and writes the 16-bit copy itself.
  Fact<bool> mixed_precision_passes;
  //! Bytes per parameter the optimizer keeps in a 16-bit run: fp32 master weights and Adam's two
  //! moments, 12 (Megatron's distributed-optimizer table); 8 with Megatron-Core's precision-aware
  //! optimizer keeping both moments in bf16 (--exp-avg-dtype / --exp-avg-sq-dtype bf16).
  Fact<int64_t> optimizer_state_bytes;
  //! The optimizer steps on the 16-bit gradient buffer itself (Megatron-Core's precision-aware
  //! optimizer with --main-grads-dtype bf16): no fp32 copy of the shard's gradient is made, and no
  //! pass casts one. False: a 16-bit buffer's shard is cast to fp32 first.
  Fact<bool> optimizer_reads_grad_buffer;
  Fact<P2pSemantics> pipeline_p2p;
  Fact<MoeDispatcher> moe_dispatcher;
  //! The shared experts run while the dispatch and combine all-to-alls are in flight (Megatron-Core
  //! --moe-shared-expert-overlap): the all-to-all hides under the shared experts' GEMMs.
  Fact<bool> moe_shared_expert_overlap;
  //! The router's probabilities multiply the experts' activation output before fc2 (Megatron-Core
  //! r0.12+, experts.py activation_func_with_probs), so the combine is a plain sum that keeps nothing
  //! for backward; the activation keeps its output for the probabilities' gradient instead. False:
  //! the combine weights the expert outputs and keeps them (h per routed copy). Memory only.
  Fact<bool> moe_probs_in_activation;
  Fact<CpCommType> cp_comm_type;
  //! Under fp8, the linear layers' weights live as FP8 data and its transpose only (Transformer
  //! Engine's FP8 parameters), in place of the 16-bit weights beside cached FP8 copies. Memory only.
  Fact<bool> fp8_params;
  //! Under fp8, the recipe the linear layers quantize with. The memory model reads it (which
  //! tensors an FP8 linear keeps, and the block scales beside them), and the op catalogue (current
  //! scaling's amax pass before each cast); every recipe's GEMMs run at the device's FP8 rate.
  Fact<Fp8Recipe> fp8_recipe;
  //! Under fp8, each linear layer keeps the FP8 copy of its input that its weight-gradient GEMM
  //! reads (1 B an element, plus the recipe's block scales) in place of the 16-bit input
  //! (Transformer Engine's Linear / LayerNormLinear / GroupedLinear). False: the 16-bit input stays
  //! and the FP8 copy is transient (our executor). Memory only (model/counting.h ActivationOptions).
  Fact<bool> fp8_saves_quantized_inputs;
};

//! The optimizer state bytes per parameter a plan at `zero_stage` runs with (a 16-bit run), and
//! whether its optimizer steps on the 16-bit gradient buffer: the profile's facts under the
//! distributed optimizer, 12 and false without it, since Megatron-Core runs its precision-aware
//! optimizer only there (megatron/core/optimizer/__init__.py: "--use-precision-aware-optimizer only
//! supported with distributed optimizer"). The memory model, the optimizer's pricing and the export read these.
inline int64_t OptimizerStateBytes(const ImplementationProfile& impl, int64_t zero_stage) {
  return zero_stage >= 1 ? impl.optimizer_state_bytes.value : 12;
}
inline bool OptimizerReadsGradBuffer(const ImplementationProfile& impl, int64_t zero_stage) {
  return zero_stage >= 1 && impl.optimizer_reads_grad_buffer.value;
}

//! Whether attention keeps statistics rather than probabilities for backward (a flash kernel always).
inline bool AttentionKeepsStatistics(const ImplementationProfile& impl) {
  return impl.attention.value == AttentionKernel::kFlash || impl.attention_keeps_statistics.value;
}

//! The one definition of a DP gradient bucket: bytes of unsharded gradient reduced (and staged)
//! at once, for a layer whose gradient holds `layer_grad_bytes`. dp_bucket_MiB 0 means one bucket
//! per layer (our executor: a layer's parameter group); otherwise buckets of that size, never more
//! than the layer. Used by the memory model (ZeRO-2/3 staging) and matched by the executor.
int64_t DpBucketBytes(const ImplementationProfile& impl, int64_t layer_grad_bytes);

//! The one definition of our executor's unfused-attention chunk (executor/cuda/cuda_kernels.cpp):
//! of `items` (sequence, kv head) pairs, how many go through the S x S fp32 score GEMM at once so
//! that their scores fit kUnfusedAttentionChunkBytes (at least one). Used by the memory model
//! (UnfusedAttentionWorkspaceBytes) and by the CUDA backend.
inline constexpr int64_t kUnfusedAttentionChunkBytes = int64_t{256} << 20;
int64_t UnfusedAttentionChunkItems(int64_t seq, int64_t items);
//! The same for `seq` queries against `keys` keys (one ring-attention block).
int64_t UnfusedAttentionChunkItems(int64_t seq, int64_t keys, int64_t items);

//! Built-in profiles: deepspeed, megatron-2021, megatron-2022, megatron-core, parallax.
std::vector<std::string> ImplementationNames();
//! A preset by name; an unknown name is bad input listing the known ones.
Result<ImplementationProfile> ImplementationPreset(const std::string& name);

//! The highest ZeRO stage `impl` runs with `pp` pipeline stages (max_zero_stage, and
//! max_zero_stage_pipelined when pp > 1).
inline int64_t MaxZeroStage(const ImplementationProfile& impl, int64_t pp) {
  return pp > 1 ? std::min(impl.max_zero_stage.value, impl.max_zero_stage_pipelined.value) : impl.max_zero_stage.value;
}
//! The preset used when nothing is named: our own executor.
inline constexpr const char* kDefaultImplementation = "parallax";
//! The default preset (our executor).
ImplementationProfile DefaultImplementation();

//! Parses {"kind":"implementation",...}; `file` names the origin in messages.
Result<ImplementationProfile> ImplementationFromJson(const Json& j, const std::string& file,
                                                     const std::string& path = "");
Json ImplementationToJson(const ImplementationProfile& p);
//! A preset name or a profile JSON file.
Result<ImplementationProfile> ResolveImplementation(const std::string& name_or_file);

const char* ToString(AttentionKernel k);
const char* ToString(GradDType d);
const char* ToString(DpAlgorithm a);
const char* ToString(OptimizerKind k);
const char* ToString(P2pSemantics p);
const char* ToString(GradAccumulation g);
const char* ToString(LossReduction r);
const char* ToString(SpGradReduction r);
const char* ToString(MoeDispatcher d);
//! Megatron-Core's value ("p2p", "all_gather", "a2a", "a2a+p2p"), or "none".
const char* ToString(CpCommType t);
//! Megatron-Core's --fp8-recipe value: "delayed", "tensorwise", "blockwise", "mxfp8".
const char* ToString(Fp8Recipe r);

}  // namespace parallax
