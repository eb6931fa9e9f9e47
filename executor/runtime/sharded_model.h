#pragma once
// This rank's part of the model: the chunks (virtual stages) it holds, their layers and
// parameter groups. Stage s = chunk * pp + pp_idx (model/schedule.h ModelStage) holds a contiguous
// run of layers: layers / (pp * v) each, the first (layers mod pp*v) stages one more. The first
// stage adds the embedding, the last the head; with tied embeddings and pp > 1 the last stage
// keeps its own copy of the word embedding, summed with the first stage's gradient each step.

#include <memory>
#include <vector>

#include "executor/runtime/context.h"
#include "executor/runtime/embedding_head.h"
#include "executor/runtime/param_group.h"
#include "executor/runtime/transformer_layer.h"
#include "model/stage_split.h"

namespace parallax::executor {

struct Chunk {
  int64_t stage = 0;
  bool first = false;
  bool last = false;
  std::vector<TransformerLayer> layers;
  std::vector<ParamGroup*> other_groups;  //!< embedding / head groups this chunk updates
};


class ShardedModel {
 public:
  //! Builds and initialises this rank's groups (collective-free); out of memory is an error.
  static Result<std::unique_ptr<ShardedModel>> Build(RuntimeContext& ctx);

  std::vector<Chunk>& chunks() { return chunks_; }
  const std::vector<ParamGroup*>& groups() const { return group_ptrs_; }
  Embedding* embedding() { return embedding_.get(); }
  Head* head() { return head_.get(); }
  ParamGroup* words() const { return words_; }
  ParamGroup* positions() const { return positions_; }
  ParamGroup* head_group() const { return head_group_; }
  //! The word-embedding group shared with the other end of the pipeline (tied, pp > 1), or null.
  ParamGroup* tied_pair() const { return tied_pair_; }
  //! The group holding the LM-head weight (words or tied copy when tied, head group otherwise).
  ParamGroup* lm_group() const { return lm_group_; }

 private:
  ParamGroup* AddGroup(RuntimeContext& ctx, std::string name, std::vector<ParamSpec> specs, int64_t stage,
                       int64_t layer);

  std::vector<std::unique_ptr<ParamGroup>> groups_;
  std::vector<ParamGroup*> group_ptrs_;
  std::vector<Chunk> chunks_;
  std::unique_ptr<Embedding> embedding_;
  std::unique_ptr<Head> head_;
  ParamGroup* words_ = nullptr;
  ParamGroup* positions_ = nullptr;
  ParamGroup* head_group_ = nullptr;
  ParamGroup* tied_pair_ = nullptr;
  ParamGroup* lm_group_ = nullptr;
  Status status_;  //!< the first allocation failure while building
};

}  // namespace parallax::executor
