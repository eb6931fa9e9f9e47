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
  Buffer x;  //!< layer input [local_tokens, hidden] (kept under every recompute mode)
  Buffer n1_mean, n1_rstd, ag, q, k, v, probs, ctx, h, n2_mean, n2_rstd, mg, f1, up, act;
  //! Sequence parallel: the local [local_tokens, hidden] inputs of QKV and fc1, re-gathered for the
  //! weight gradients in backward instead of keeping the gathered [tokens, hidden] `ag`/`mg`.
  Buffer ag_local, mg_local;
  bool dropped = false;  //!< full recompute: only x is kept
};

class TransformerLayer {
 public:
  TransformerLayer(int64_t layer, ParamGroup* group, LayerParamIndex index)
      : layer_(layer), group_(group), ix_(index) {}

  int64_t layer() const { return layer_; }
  ParamGroup& group() const { return *group_; }

  //! x: [local_tokens, hidden], moved into the cache. Returns the layer output.
  Result<Buffer> Forward(RuntimeContext& ctx, Buffer x, LayerCache& cache);
  //! dout: gradient of the output. Accumulates parameter gradients; returns d(input). Frees the cache.
  Result<Buffer> Backward(RuntimeContext& ctx, LayerCache& cache, Buffer dout);

 private:
  Result<Buffer> Run(RuntimeContext& ctx, Buffer x, LayerCache& c, bool keep_probs);
  Result<Buffer> Grad(RuntimeContext& ctx, LayerCache& c, Buffer dout);
  float* P(int i) const { return i < 0 ? nullptr : group_->param(static_cast<size_t>(i)); }
  float* G(int i) const { return i < 0 ? nullptr : group_->grad(static_cast<size_t>(i)); }

  int64_t layer_;
  ParamGroup* group_;
  LayerParamIndex ix_;
};

//! Norm forward/backward for the model's kind (LayerNorm or RMSNorm); `beta`/`dbeta` may be null.
void NormForward(RuntimeContext& ctx, const float* x, const float* gamma, const float* beta, float* y, float* mean,
                 float* rstd, int64_t rows);
void NormBackward(RuntimeContext& ctx, const float* dy, const float* x, const float* gamma, const float* mean,
                  const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows);
//! y[rows, n] = x[rows, k] W^T (+ bias) with W [n, k].
void LinearForward(Backend& be, const float* x, const float* w, const float* bias, float* y, int64_t rows,
                   int64_t n, int64_t k);
//! dW += dy^T x, dbias += colsum(dy); dx = dy W (+= when accumulate_dx).
void LinearBackward(Backend& be, const float* dy, const float* x, const float* w, float* dw, float* dbias, float* dx,
                    int64_t rows, int64_t n, int64_t k, bool accumulate_dx);

}  // namespace parallax::executor
