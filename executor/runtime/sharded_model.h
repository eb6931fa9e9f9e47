#pragma once
// This rank's part of the model: the chunks (virtual stages) it holds, their layers and
// parameter groups, built as model/param_groups.h RankParamGroups lists them (which groups, in
// which order, their stage, layer and norm membership); ParamGroup adds the storage and ZeRO.

#include <memory>
#include <vector>

#include "executor/runtime/context.h"
#include "executor/runtime/embedding_head.h"
#include "executor/runtime/param_group.h"
#include "executor/runtime/transformer_layer.h"
#include "model/param_groups.h"

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
  ParamGroup* AddGroup(RuntimeContext& ctx, const ParamGroupDef& def, std::vector<ParamSpec> specs);

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
