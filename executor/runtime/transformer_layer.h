#pragma once
// One pre-norm decoder layer with Megatron tensor parallelism: column-parallel Q/K/V and fc1
// (gate/up for SwiGLU), row-parallel output projection and fc2, each TP rank holding
// heads/tp attention heads and ffn_hidden/tp MLP columns. Weights are [out, in] (y = x W^T).
// Activation recompute (Korthikanti et al. 2022): none keeps everything; selective drops the
// attention probabilities and recomputes them in backward; full keeps only the layer input and
// reruns the forward pass (phase recompute) before the backward pass.

#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/context.h"
#include "executor/runtime/param_group.h"

namespace parallax::executor {

//! Positions of the layer's parameters inside its group (-1: absent in this model).
struct LayerParamIndex {
  int ln1_w = -1, ln1_b = -1, wq = -1, bq = -1, wk = -1, bk = -1, wv = -1, bv = -1, wo = -1, bo = -1;
  int ln2_w = -1, ln2_b = -1, fc1 = -1, b1 = -1, up = -1, bup = -1, fc2 = -1, b2 = -1;
};

//! The logical parameters of global layer `layer` (names "layer3.wq", ...).
std::vector<ParamSpec> LayerParamSpecs(const ModelSpec& m, int64_t layer, LayerParamIndex* index);

//! Saved activations of one layer for one micro-batch.
struct LayerCache {
  Tensor x;  //!< layer input [local_tokens, hidden] (kept under every recompute mode)
  Tensor n1_mean, n1_rstd, ag, q, k, v, probs, ctx, h, n2_mean, n2_rstd, mg, f1, up, act;
  //! Sequence parallel: the local [local_tokens, hidden] inputs of QKV and fc1, re-gathered for the
  //! weight gradients in backward instead of keeping the gathered [tokens, hidden] `ag`/`mg`.
  Tensor ag_local, mg_local;
  bool dropped = false;  //!< full recompute: only x is kept
};

class TransformerLayer {
 public:
  TransformerLayer(int64_t layer, ParamGroup* group, LayerParamIndex index)
      : layer_(layer), group_(group), ix_(index) {}

  int64_t layer() const { return layer_; }
  ParamGroup& group() const { return *group_; }

  //! x: [local_tokens, hidden], moved into the cache. Returns the layer output.
  Result<Tensor> Forward(RuntimeContext& ctx, Tensor x, LayerCache& cache);
  //! dout: gradient of the output. Accumulates parameter gradients; returns d(input). Frees the cache.
  Result<Tensor> Backward(RuntimeContext& ctx, LayerCache& cache, Tensor dout);

 private:
  Result<Tensor> Run(RuntimeContext& ctx, Tensor x, LayerCache& c, bool keep_probs);
  Result<Tensor> Grad(RuntimeContext& ctx, LayerCache& c, Tensor dout);
  DevPtr P(int i) const { return i < 0 ? DevPtr{} : group_->param(static_cast<size_t>(i)); }
  DevPtr G(int i) const { return i < 0 ? DevPtr{} : group_->grad(static_cast<size_t>(i)); }

  int64_t layer_;
  ParamGroup* group_;
  LayerParamIndex ix_;
};

//! Norm forward/backward for the model's kind (LayerNorm or RMSNorm); `beta`/`dbeta` may be null.
void NormForward(RuntimeContext& ctx, DevPtr x, DevPtr gamma, DevPtr beta, DevPtr y, DevPtr mean, DevPtr rstd,
                 int64_t rows);
void NormBackward(RuntimeContext& ctx, DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd, DevPtr dx,
                  DevPtr dgamma, DevPtr dbeta, int64_t rows);
//! h = branch + stream (+ bias), then y = norm(h), in one fused backend call.
void ResidualNormForward(RuntimeContext& ctx, DevPtr branch, DevPtr stream, DevPtr bias, DevPtr h, DevPtr gamma,
                         DevPtr beta, DevPtr y, DevPtr mean, DevPtr rstd, int64_t rows);
//! dresidual += the norm's input gradient; dgamma, dbeta +=.
Status NormBackwardAdd(RuntimeContext& ctx, DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd,
                       DevPtr dresidual, DevPtr dgamma, DevPtr dbeta, int64_t rows);
//! y[rows, n] = x[rows, k] W^T (+ bias) with W [n, k].
void LinearForward(Backend& be, DevPtr x, DevPtr w, DevPtr bias, DevPtr y, int64_t rows, int64_t n, int64_t k);
//! dW (fp32) += dy^T x, dbias += colsum(dy); dx = dy W (+= when accumulate_dx).
void LinearBackward(Backend& be, DevPtr dy, DevPtr x, DevPtr w, DevPtr dw, DevPtr dbias, DevPtr dx, int64_t rows,
                    int64_t n, int64_t k, bool accumulate_dx);

}  // namespace parallax::executor
