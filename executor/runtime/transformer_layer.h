#pragma once
// One pre-norm decoder layer with Megatron tensor parallelism: column-parallel Q/K/V and fc1
// (gate/up for SwiGLU), row-parallel output projection and fc2, each TP rank holding
// heads/tp attention heads and ffn_hidden/tp MLP columns. Weights are [out, in] (y = x W^T).
// Activation recompute (Korthikanti et al. 2022): none keeps everything; selective drops the
// attention core's row statistics (its log-sum-exp: attention never keeps the probabilities) and
// reruns its forward in backward; full keeps only the layer input and reruns the forward pass
// (phase recompute) before the backward pass.

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/context.h"
#include "executor/runtime/moe_layer.h"
#include "executor/runtime/param_group.h"

namespace parallax::executor {

//! Positions of the layer's parameters inside its group (-1: absent in this model).
struct LayerParamIndex {
  int ln1_w = -1, ln1_b = -1, wq = -1, bq = -1, wk = -1, bk = -1, wv = -1, bv = -1, wo = -1, bo = -1;
  int ln2_w = -1, ln2_b = -1, fc1 = -1, b1 = -1, up = -1, bup = -1, fc2 = -1, b2 = -1;
  int router = -1;  //!< an MoE layer's router; its fc1/up/fc2 are the shared experts' (absent without them)
  // Multi-head latent attention (in place of wq, wk, wv): the query down-projection and its norm
  // (absent without q_lora_rank), the queries' no-position and rotary parts (from the query latent,
  // or from the input directly), the KV latent's down-projection and norm, the shared rotary key,
  // and the keys' and values' up-projections.
  int q_down = -1, q_norm = -1, q_nope = -1, q_rope = -1, kv_down = -1, kv_norm = -1, k_rope = -1, k_up = -1,
      v_up = -1;
};

//! Columns of layer `layer`'s dense MLP: ffn_hidden, or in an MoE layer its shared experts'
//! shared_experts x moe_ffn_hidden (0 without them).
inline int64_t MlpWidth(const ModelSpec& m, int64_t layer) {
  return IsMoeLayer(m, layer) ? m.shared_experts * m.moe_ffn_hidden : m.ffn_hidden;
}

//! The logical parameters of global layer `layer` (names "layer3.wq", ...).
std::vector<ParamSpec> LayerParamSpecs(const ModelSpec& m, int64_t layer, LayerParamIndex* index);

//! Saved activations of one layer for one micro-batch.
struct LayerCache {
  Tensor x;  //!< layer input [local_tokens, hidden] (kept under every recompute mode)
  Tensor n1_mean, n1_rstd, ag, q, k, v, lse, ctx, h, n2_mean, n2_rstd, mg, f1, up, act;
  //! Multi-head latent attention: the query and KV latents before their norms (kept; the normed ones
  //! and the norms' statistics only while computed), the values and the attention output at the value
  //! width (kept; widened to the query width only around the attention core).
  Tensor cq, cq_rstd, cqn, ckv, ckv_rstd, ckvn, ctx_v, mla_v;
  //! Sequence parallel: the local [local_tokens, hidden] inputs of QKV and fc1, re-gathered for the
  //! weight gradients in backward instead of keeping the gathered [tokens, hidden] `ag`/`mg`.
  Tensor ag_local, mg_local;
  bool dropped = false;  //!< full recompute: only x is kept
  std::shared_ptr<MoeCache> moe;  //!< an MoE layer's routed experts
};

class TransformerLayer {
 public:
  TransformerLayer(int64_t layer, ParamGroup* group, LayerParamIndex index)
      : layer_(layer), group_(group), ix_(index) {}

  int64_t layer() const { return layer_; }
  ParamGroup& group() const { return *group_; }
  //! An MoE layer's routed experts (a group of their own, reduced over expert dp), else null.
  ParamGroup* experts() const { return experts_; }
  void set_experts(ParamGroup* g) { experts_ = g; }

  //! x: [local_tokens, hidden], moved into the cache. Returns the layer output.
  Result<Tensor> Forward(RuntimeContext& ctx, Tensor x, LayerCache& cache);
  //! dout: gradient of the output. Accumulates parameter gradients; returns d(input). Frees the cache.
  Result<Tensor> Backward(RuntimeContext& ctx, LayerCache& cache, Tensor dout);

 private:
  Result<Tensor> Run(RuntimeContext& ctx, Tensor x, LayerCache& c, bool keep_stats);
  //! norm1, QKV, attention, output projection: returns the projection leaving the TP region.
  //! keep_stats false (selective recompute): the attention statistics are not kept.
  Result<Tensor> AttentionBlockForward(RuntimeContext& ctx, LayerCache& c, bool keep_stats);
  //! The residual join with `attn` into norm2, fc1, activation, fc2 and the final residual add.
  Result<Tensor> MlpBlockForward(RuntimeContext& ctx, LayerCache& c, Tensor attn);
  //! fc1, activation and fc2 of `cols` columns per TP rank on c.mg (the dense MLP, or an MoE layer's
  //! shared experts); the partial output [tokens, H] (zero when cols is 0).
  Result<Tensor> DenseMlpForward(RuntimeContext& ctx, LayerCache& c, int64_t cols);
  //! Backward of DenseMlpForward from d(its output) `dy`: returns d(c.mg) [tokens, H], partial over TP,
  //! added onto `dmg` when it is given (the routed experts' part).
  Result<Tensor> DenseMlpGrad(RuntimeContext& ctx, LayerCache& c, Tensor dy, int64_t cols, Tensor dmg);
  //! The routed experts on this TP rank's share of the block's rows.
  MoeParams Moe() const { return {.layer = layer_, .group = group_, .router = ix_.router, .experts = experts_}; }
  Result<Tensor> Grad(RuntimeContext& ctx, LayerCache& c, Tensor dout);
  //! Backward through the MLP block: returns d(h), the gradient of the residual stream between
  //! the blocks.
  Result<Tensor> MlpBlockGrad(RuntimeContext& ctx, LayerCache& c, Tensor dout);
  //! Backward through the attention block from d(h): returns d(x).
  Result<Tensor> AttentionBlockGrad(RuntimeContext& ctx, LayerCache& c, Tensor dh);
  //! Multi-head latent attention's projections (executor/runtime/mla_attention.cpp): c.q, c.k and c.v
  //! [tokens, heads/tp x (nope + rope)] from c.ag, the values zero-padded to the query width.
  Status MlaProject(RuntimeContext& ctx, LayerCache& c);
  //! After the attention core: c.ctx_v, the output at the value width (the output projection's input);
  //! the widened output and values are dropped. MlaWiden rebuilds them for the core's backward.
  Status MlaNarrow(RuntimeContext& ctx, LayerCache& c);
  Status MlaWiden(RuntimeContext& ctx, LayerCache& c);
  //! Their backward from the attention core's dq, dk, dv (freed as they are read): parameter
  //! gradients, and d(c.ag) written into `dag` [tokens, hidden] (partial over TP).
  Status MlaProjectGrad(RuntimeContext& ctx, LayerCache& c, Tensor& dq, Tensor& dk, Tensor& dv, DevPtr dag);
  //! The attention core's backward, `a` without lse: the cache's, or, dropped by selective
  //! recompute, rebuilt first in phase recompute.
  Status AttentionCoreGrad(RuntimeContext& ctx, LayerCache& c, AttentionBackwardArgs a);
  DevPtr P(int i) const { return i < 0 ? DevPtr{} : group_->param(static_cast<size_t>(i)); }
  DevPtr G(int i) const { return i < 0 ? DevPtr{} : group_->grad(static_cast<size_t>(i)); }
  //! The FP8 scales of the GEMM whose weight is parameter i (off unless the group has FP8 state).
  Fp8Linear F8(int i) const { return i < 0 || group_->fp8() == nullptr ? Fp8Linear{} : group_->fp8()->Linear(i); }

  int64_t layer_;
  ParamGroup* group_;
  LayerParamIndex ix_;
  ParamGroup* experts_ = nullptr;
};

//! The norm epsilon of every model the executor runs.
inline constexpr float kNormEps = 1e-5f;

//! Norm forward/backward for the model's kind: LayerNorm, or RMSNorm (which reads neither beta nor
//! mean, nor writes dbeta).
void NormForward(RuntimeContext& ctx, const NormArgs& a);
void NormBackward(RuntimeContext& ctx, const NormBackwardArgs& a);
//! h = x + residual (+ bias), then y = norm(h), in one fused backend call.
void ResidualNormForward(RuntimeContext& ctx, const ResidualNormArgs& a);
//! dx += the norm's input gradient; dgamma, dbeta +=.
void NormBackwardAdd(RuntimeContext& ctx, const NormBackwardArgs& a);

//! y[rows, n] = x[rows, k] W^T (+ bias) with W [n, k].
struct LinearArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, w{}, bias{};  //!< bias optional
  DevPtr y{};
  int64_t rows = 0, n = 0, k = 0;
  Fp8Linear fp8{};  //!< set (on()): the GEMM in FP8 with these scales (runtime/fp8_linear.h)
};
void LinearForward(Backend& be, const LinearArgs& a);

//! dW (fp32) += dy^T x, dbias += colsum(dy); dx = dy W (+= when accumulate_dx). dbias and dx
//! optional.
struct LinearBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr dy{}, x{}, w{};
  DevPtr dw{}, dbias{}, dx{};
  int64_t rows = 0, n = 0, k = 0;
  bool accumulate_dx = false;
  Fp8Linear fp8{};  //!< as LinearArgs::fp8
};
void LinearBackward(Backend& be, const LinearBackwardArgs& a);

}  // namespace parallax::executor
