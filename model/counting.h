#pragma once
// Parameter, FLOP and activation-byte counting for a ModelSpec.
// FLOPs follow Megatron's convention (Narayanan et al. SC'21, appendix): a GEMM of m*n*k is
// 2mnk; attention scores and AV are counted over the full s x s square (no causal halving),
// which is what the published TFLOP/s figures count. Backward is 2x forward.

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"
#include "model/plan.h"

namespace parallax {

//! One op of a transformer layer (or of the embedding / head), forward, per token.
struct OpCount {
  std::string name;  //!< OpKind name: "qkv", "attn_core", ...; MoE: "router", "experts", "shared_experts"
  int64_t params = 0;
  double fwd_flops_per_token = 0;
  int64_t active_params = 0;  //!< the parameters one token reads (experts: top-k of them)
};

//! One transformer layer.
struct LayerCount {
  bool moe = false;    //!< IsMoeLayer
  bool local = false;  //!< IsLocalAttentionLayer
  int64_t params = 0;
  int64_t active_params = 0;
  double fwd_flops_per_token = 0;
  double attn_core_flops_per_token = 0;  //!< the part selective recompute repeats
};

struct ModelCounts {
  //! Layer 0's parameters (every layer's in a dense model without local attention layers).
  int64_t params_per_layer = 0;
  int64_t params_embedding = 0;  //!< token (+ learned position) embedding
  int64_t params_lm_head = 0;    //!< 0 when tied to the embedding
  int64_t params_final_norm = 0;
  int64_t params_total = 0;
  //! The activated parameters: all but the routed experts a token is not sent to (top-k of them
  //! counted), the whole embedding table included, as Mixtral's, Qwen3's, Llama 4's and DeepSeek-V3's
  //! published "active" counts are.
  int64_t params_active = 0;
  //! DeepSeek-V3's multi-token-prediction modules (its projection, norms and one layer each; the
  //! embedding and head shared): not in params_total, which counts the main model as published.
  int64_t params_mtp = 0;
  int64_t moe_layers = 0;
  double fwd_flops_per_token_per_layer = 0;  //!< layer 0's
  double fwd_flops_per_token_head = 0;  //!< LM head
  double fwd_flops_per_token = 0;       //!< whole model, forward (active parameters only)
  std::vector<OpCount> layer_ops;       //!< breakdown of layer 0
  std::vector<OpCount> moe_layer_ops;   //!< breakdown of the first MoE layer (empty for a dense model)
  std::vector<OpCount> outer_ops;       //!< embedding, final norm, LM head
  std::vector<LayerCount> layers;       //!< every transformer layer, in order
};

//! The ops of transformer layer `layer` (0-based) with parameters and forward FLOPs per token.
//! FLOPs: 2 per multiply-add of each GEMM (Megatron's convention); attention over the full square
//! of the keys each query may see (AttendedKeys); experts at top-k; router scores 2 h E.
std::vector<OpCount> LayerOps(const ModelSpec& m, int64_t layer, int64_t seq_len = 0);

//! Parameters of one layer/RMS norm: weight (+ bias for LayerNorm).
int64_t NormParams(const ModelSpec& m);

//! Counts for sequence length `seq_len` (0 = the model's).
ModelCounts CountModel(const ModelSpec& m, int64_t seq_len = 0);
//! CountModel at the model's own sequence length, for the parameter counts the memory model and the
//! parameter groups ask for per layout: the last model's counts are kept per thread, so the reference
//! holds until this thread asks for another model.
const ModelCounts& CountParams(const ModelSpec& m);

//! Forward FLOPs per token that selective recompute's mla_up_proj (the up-projection GEMMs) and mlp
//! (a dense layer's MLP GEMMs) repeat in a layer; core_attn's are LayerCount::attn_core_flops_per_token.
double SelectiveModuleFlopsPerToken(const ModelSpec& m, bool moe_layer, uint32_t selective_modules);

//! FLOPs per token of one training step: forward + backward (2x) + recomputed forward work
//! (full: the whole layer forward again; selective: the attention core again).
//! `selective_modules` (RecomputeModule bits) say what selective recompute reruns; core_attn,
//! mla_up_proj and mlp add FLOPs (the norms and the activation are memory-bound kernels, counted
//! as none).
double TrainingFlopsPerToken(const ModelSpec& m, int64_t seq_len, Recompute recompute,
                             uint32_t selective_modules = kRecomputeCoreAttn);

//! The part of the per-layer forward FLOPs per token that selective recompute repeats.
double AttentionCoreFlopsPerToken(const ModelSpec& m, int64_t seq_len);

struct ActivationOptions {
  int64_t micro_batch = 1;
  int64_t seq_len = 0;  //!< 0 = the model's
  int64_t tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  uint32_t selective_modules = kRecomputeCoreAttn;  //!< with recompute selective (Layout::selective_modules)
  int64_t bytes_per_element = 2;  //!< 2 for bf16/fp16 activations, 4 for fp32
  // What the implementation keeps (ImplementationProfile; ForImplementation fills these):
  bool dropout = true;             //!< the model's dropout masks are kept (false: no dropout applied)
  //! attention keeps the fp32 row log-sum-exp, not the s x s probabilities (AttentionKeepsStatistics:
  //! flash attention, and our executor's GEMM path)
  bool attention_keeps_statistics = false;
  bool fp32_cross_entropy = true;  //!< the loss keeps an fp32 softmax beside the logits (else their gradient)
  //! Under fp8 where the linears keep the FP8 copy of their input (ImplementationProfile::
  //! fp8_saves_quantized_inputs): the bytes of one kept FP8 element in 32nds of a byte, 32 for
  //! per-tensor scales (delayed, tensorwise), 33 with block scales (mxfp8: one E8M0 byte per 32
  //! elements; blockwise: an fp32 scale per 128). 0: a linear keeps its input in the element size.
  int64_t fp8_input_32nds = 0;
  //! The output projection keeps an FP8 copy of its input beside the core attention's 16-bit
  //! output (Megatron-Core under the delayed recipe); otherwise the two share the 16-bit tensor.
  bool fp8_proj_copy = false;
  //! The MoE combine weights the expert outputs by the probabilities and keeps them (h per routed
  //! copy); false: the probabilities multiply the activation, which keeps its output and the fp32
  //! probabilities instead (ImplementationProfile::moe_probs_in_activation).
  bool moe_combine_keeps_outputs = true;
};

//! `o` with the implementation's facts: applies_dropout, attention, fp32_cross_entropy, and under
//! fp8 what its linears keep (fp8_saves_quantized_inputs, fp8_recipe), and what the MoE combine keeps.
ActivationOptions ForImplementation(ActivationOptions o, const ImplementationProfile& impl, Precision precision);

//! Activation bytes one transformer layer keeps for backward, per micro-batch, per TP rank (layer
//! 0's shape; ActivationBytesOfLayer for a given layer of an MoE or local-attention model)
//! (Korthikanti et al. 2022, section 4: 34sbh + 5as^2b for 16-bit GPT with dropout, then
//! sharded by tensor / sequence parallelism). Generalised here to grouped-query attention,
//! any ffn_hidden, SwiGLU, no dropout, flash attention (4asb of fp32 log-sum-exp instead of the
//! probabilities) and other element sizes, plus what the paper leaves out: the two norms' fp32
//! statistics (mean and 1/rms: 16 bytes a token, sharded with the norms' inputs). Full recompute
//! keeps only the layer input (2sbh, /t with sequence parallel).
int64_t ActivationBytesPerLayer(const ModelSpec& m, const ActivationOptions& o);

//! What an MoE layer keeps beyond the attention half, per micro-batch per rank, tokens balanced over
//! the experts (DESIGN.md "Mixture of experts"): the router's input and fp32 scores (h e + 4 E per
//! token), the permuted tokens each rank receives (k copies per token, h e each: the dispatch
//! buffer), each routed and shared expert's fc1 input, fc1 output and activation output at top-k
//! (as a dense MLP of moe_ffn_hidden, split over etp), and the combine buffer (k h e per token).
//! `etp` splits the expert width; tokens are those of the rank's tp x cp shard (tp with sequence
//! parallelism, as Megatron-Core's dispatcher gathers none with SP off: then every tp rank routes
//! the same tokens). Full recompute keeps none of it.
int64_t MoeActivationBytes(const ModelSpec& m, const ActivationOptions& o, int64_t etp);
//! Activation bytes of layer `layer`: the attention half, then a dense MLP or MoeActivationBytes.
int64_t ActivationBytesOfLayer(const ModelSpec& m, int64_t layer, const ActivationOptions& o, int64_t etp = 0);

//! The working set of one layer's recomputation, which re-materializes one layer at a time: full
//! recompute the whole layer (ActivationBytesPerLayer with recompute none), selective only what it
//! dropped (none minus selective: the attention core's probabilities or statistics); 0 without recompute.
int64_t RecomputeWorkingBytes(const ModelSpec& m, const ActivationOptions& o);

//! Activations kept by the first stage for the embedding output and by the last stage for the
//! final norm, LM head and loss (logits in the element size plus an fp32 softmax, or plus their
//! gradient in the element size without fp32_cross_entropy), per micro-batch per TP rank.
int64_t EmbeddingActivationBytes(const ModelSpec& m, const ActivationOptions& o);
int64_t HeadActivationBytes(const ModelSpec& m, const ActivationOptions& o);
//! One multi-token-prediction module's parameters outside its transformer layer, per TP rank
//! (DeepSeek-V3 report, section 2.2): the projection of [h; embedding] (2h x h, column-parallel)
//! and two RMSNorms; the module shares the embedding and the head.
int64_t MtpOwnParams(const ModelSpec& m, int64_t tp);
//! Activations one multi-token-prediction module keeps per micro-batch per TP rank, on the stage
//! StageMtpModules (model/stage_split.h) names: its two norms' inputs and its [h; embedding]
//! projection's input (4h a token, counted whole), its transformer layer (the last layer's kind),
//! counted without recompute, and its pass through the shared head and loss (HeadActivationBytes).
//! An upper bound: whether a framework recomputes or shards them is not modelled.
int64_t MtpActivationBytes(const ModelSpec& m, const ActivationOptions& o, int64_t etp = 0);

}  // namespace parallax
