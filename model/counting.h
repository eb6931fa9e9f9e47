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
  std::string name;  //!< OpKind name: "qkv", "attn_core", ...
  int64_t params = 0;
  double fwd_flops_per_token = 0;
};

struct ModelCounts {
  int64_t params_per_layer = 0;
  int64_t params_embedding = 0;  //!< token (+ learned position) embedding
  int64_t params_lm_head = 0;    //!< 0 when tied to the embedding
  int64_t params_final_norm = 0;
  int64_t params_total = 0;
  double fwd_flops_per_token_per_layer = 0;
  double fwd_flops_per_token_head = 0;  //!< LM head
  double fwd_flops_per_token = 0;       //!< whole model, forward
  std::vector<OpCount> layer_ops;       //!< breakdown of one transformer layer
  std::vector<OpCount> outer_ops;       //!< embedding, final norm, LM head
};

//! Parameters of one layer/RMS norm: weight (+ bias for LayerNorm).
int64_t NormParams(const ModelSpec& m);

//! Counts for sequence length `seq_len` (0 = the model's).
ModelCounts CountModel(const ModelSpec& m, int64_t seq_len = 0);
//! CountModel's parameter counts alone (FLOP fields 0): no op catalogue is built, so the memory
//! model and the parameter groups can ask per layout.
ModelCounts CountParams(const ModelSpec& m);

//! FLOPs per token of one training step: forward + backward (2x) + recomputed forward work
//! (full: the whole layer forward again; selective: the attention core again).
double TrainingFlopsPerToken(const ModelSpec& m, int64_t seq_len, Recompute recompute);

//! The part of the per-layer forward FLOPs per token that selective recompute repeats.
double AttentionCoreFlopsPerToken(const ModelSpec& m, int64_t seq_len);

struct ActivationOptions {
  int64_t micro_batch = 1;
  int64_t seq_len = 0;  //!< 0 = the model's
  int64_t tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  int64_t bytes_per_element = 2;  //!< 2 for bf16/fp16 activations, 4 for fp32
  // What the implementation keeps (ImplementationProfile; ForImplementation fills these):
  bool dropout = true;             //!< the model's dropout masks are kept (false: no dropout applied)
  //! attention keeps the fp32 row log-sum-exp, not the s x s probabilities (AttentionKeepsStatistics:
  //! flash attention, and our executor's GEMM path)
  bool attention_keeps_statistics = false;
  bool fp32_cross_entropy = true;  //!< the loss keeps an fp32 softmax beside the logits (else their gradient)
};

//! `o` with the implementation's facts: applies_dropout, attention, fp32_cross_entropy.
ActivationOptions ForImplementation(ActivationOptions o, const ImplementationProfile& impl);

//! Activation bytes one transformer layer keeps for backward, per micro-batch, per TP rank
//! (Korthikanti et al. 2022, section 4: 34sbh + 5as^2b for 16-bit GPT with dropout, then
//! sharded by tensor / sequence parallelism). Generalised here to grouped-query attention,
//! any ffn_hidden, SwiGLU, no dropout, flash attention (4asb of fp32 log-sum-exp instead of the
//! probabilities) and other element sizes, plus what the paper leaves out: the two norms' fp32
//! statistics (mean and 1/rms: 16 bytes a token, sharded with the norms' inputs). Full recompute
//! keeps only the layer input (2sbh, /t with sequence parallel).
int64_t ActivationBytesPerLayer(const ModelSpec& m, const ActivationOptions& o);

//! The working set of one layer's recomputation, which re-materializes one layer at a time: full
//! recompute the whole layer (ActivationBytesPerLayer with recompute none), selective only what it
//! dropped (none minus selective: the attention core's probabilities or statistics); 0 without recompute.
int64_t RecomputeWorkingBytes(const ModelSpec& m, const ActivationOptions& o);

//! Activations kept by the first stage for the embedding output and by the last stage for the
//! final norm, LM head and loss (logits in the element size plus an fp32 softmax, or plus their
//! gradient in the element size without fp32_cross_entropy), per micro-batch per TP rank.
int64_t EmbeddingActivationBytes(const ModelSpec& m, const ActivationOptions& o);
int64_t HeadActivationBytes(const ModelSpec& m, const ActivationOptions& o);

}  // namespace parallax
