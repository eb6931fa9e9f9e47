#pragma once
// The first stage's embedding (vocab-parallel word embedding + learned positions) and the last
// stage's head (final norm, vocab-parallel LM head, vocab-parallel cross-entropy; Megatron-LM).

#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/context.h"
#include "executor/runtime/param_group.h"

namespace parallax::executor {

//! Word embedding [vocab, hidden] split by vocabulary rows over TP (also the tied LM head).
std::vector<ParamSpec> WordEmbeddingSpecs(const ModelSpec& m);
//! Learned position embedding [seq_len, hidden], replicated over TP.
std::vector<ParamSpec> PositionEmbeddingSpecs(const ModelSpec& m);
//! Final norm (+ untied LM head [vocab, hidden] split by vocabulary rows).
std::vector<ParamSpec> HeadSpecs(const ModelSpec& m);

struct EmbeddingCache {
  Tensor tokens;     //!< kI32 on the backend
  Tensor positions;  //!< kI32 position of each local row (learned positions only)
};

struct HeadCache {
  Tensor x, mean, rstd, zg, logits, targets;
  //! The loss statistics of every vocabulary slice of the TP group, side by side (fp32, 3 x tokens
  //! each: row max | sum_exp | target logit); combined when the backward starts.
  Tensor stats;
};

class Embedding {
 public:
  //! `positions` may be null (rotary models have no position table).
  Embedding(ParamGroup* words, ParamGroup* positions) : words_(words), positions_(positions) {}
  //! `tokens` are this micro-batch's inputs on the host; they are copied to the backend.
  Result<Tensor> Forward(RuntimeContext& ctx, const std::vector<int32_t>& tokens, EmbeddingCache& cache);
  Status Backward(RuntimeContext& ctx, EmbeddingCache& cache, Tensor dout);

 private:
  ParamGroup* words_;
  ParamGroup* positions_;
};

class Head {
 public:
  //! `lm_weight_group`/`lm_weight_index`: the word embedding when tied, else the head's own weight.
  Head(ParamGroup* head, ParamGroup* lm_group, size_t lm_index) : head_(head), lm_(lm_group), lm_index_(lm_index) {}
  //! Logits and the cross-entropy statistics of every vocabulary slice (all-gathered when tp > 1).
  Status Forward(RuntimeContext& ctx, Tensor x, const std::vector<int32_t>& targets, HeadCache& cache);
  //! Adds the sum over this micro-batch's tokens of the cross-entropy to ctx.loss_sum (on the
  //! backend; identical on every TP rank), and returns the gradient of (loss_scale * summed loss)
  //! w.r.t. the head input.
  Result<Tensor> Backward(RuntimeContext& ctx, HeadCache& cache);

 private:
  ParamGroup* head_;
  ParamGroup* lm_;
  size_t lm_index_;
};

}  // namespace parallax::executor
