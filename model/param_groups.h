#pragma once
// Parameter groups: which weights each pipeline rank holds, in which groups, how ZeRO shards them,
// when they are gathered and over which group their gradients are reduced. One definition for the
// executor's sharded model (it builds exactly these groups), the memory model, the cost model and
// the simulator.
//
// A group is the unit of ZeRO partitioning and of our executor's DP gradient bucket: one per
// transformer layer; the word embedding and learned positions on the first stage; the head (final
// norm, + the LM head when untied) on the last; with tied embeddings and pp > 1, Megatron's copy
// of the word embedding on the last stage, its gradient summed with the first stage's each step.
//
// Order (RankParamGroups): chunk by chunk (virtual stage 0..v-1), inside a chunk by first use in
// a forward: the embedding pass's groups, the layers in ascending order, the head pass's groups.
// The executor builds the groups in this order; the ZeRO-1/2 parameter gather after the optimizer
// step (and its overlapped variant under the next forward) runs in this order; a chunk's groups
// outside the layers are reduced after the chunk's backward in this order, a layer's after its
// own backward. Within one pass, ZeRO-3 gathers in AcquireRound order; layers are prefetched
// `prefetch_ahead` ahead in the pass's direction.

#include <cstdint>
#include <string>
#include <vector>

#include "model/plan.h"

namespace parallax {

//! kExperts: an MoE layer's routed experts held by this rank (experts / ep of them, each split over
//! etp), a group of their own after their layer's, reduced over the expert data-parallel group.
enum class ParamGroupKind { kWordEmbedding, kPositionEmbedding, kLayer, kHead, kTiedEmbeddingCopy, kExperts };

//! The passes over one model chunk, in forward order; a backward runs them in reverse.
enum class ChunkPass { kEmbedding, kLayer, kHead };

//! The ranks a group's gradient is summed over, and its ZeRO shards split over (model/rank_groups.h
//! places it in the rank order): dense weights over dp x cp (the dp group when cp = 1: each cp rank
//! saw its part of the same sequences), routed experts over the expert data-parallel group (edp =
//! tp x cp x dp / (ep x etp) ranks of the stage, Megatron-Core's parallel folding: the ranks holding
//! the same experts' same etp shard). Read wherever a group is reduced, sharded or gathered
//! (planner/cost placement, the memory model, the executor's communicators).
enum class ReductionGroup { kDpCp, kExpertDp };
//! Ranks in `g` for layout `l`.
int64_t ReductionGroupSize(const Layout& l, ReductionGroup g);

//! What ZeRO shards over the reduction group (Rajbhandari et al. SC'20: P_os, P_os+g,
//! P_os+g+p for stages 1, 2, 3).
struct ZeroSharding {
  bool optimizer = false;
  bool gradients = false;
  bool weights = false;
  bool operator==(const ZeroSharding&) const = default;
};
ZeroSharding ZeroShardingFor(int64_t zero_stage);

struct ParamGroupDef {
  ParamGroupKind kind = ParamGroupKind::kLayer;
  //! The executor's group name: word_embedding (also the tied copy), position_embedding, layer<i>, head.
  std::string name;
  int64_t stage = 0;   //!< model stage holding it (ModelStage(pp, pp_rank, chunk))
  int64_t chunk = 0;   //!< virtual stage on its pipeline rank
  int64_t layer = -1;  //!< global layer index; -1 outside the transformer layers
  int64_t params = 0;  //!< per TP rank (tensor-parallel shards; norms and row-parallel biases whole), before ZeRO
  int64_t bytes = 0;   //!< its weights in the compute dtype per TP rank: what one ZeRO gather of it moves
  //! The passes of its chunk that read it (the head reads a word embedding it is tied to).
  bool uses_embedding = false, uses_layer = false, uses_head = false;
  ChunkPass first_use = ChunkPass::kLayer;  //!< first pass of a forward to read it: its place in the order
  //! First backward pass adding to its gradient: ZeRO-2/3 zero-fill its transient gradient there.
  ChunkPass grad_first_pass = ChunkPass::kLayer;
  //! The pass whose backward completes its gradient (the last to add to it): a gradient-accumulation
  //! pass of the group follows that pass's backward.
  ChunkPass grad_pass = ChunkPass::kLayer;
  ReductionGroup reduced_over = ReductionGroup::kDpCp;
  ZeroSharding sharded;  //!< over `reduced_over`, by the layout's ZeRO stage
  //! Summed with the other pipeline end's copy of the tied word embedding after the DP reduction
  //! (Megatron's embedding group: the first stage's word embedding and the last stage's copy).
  bool tied_pair = false;
  bool counts_in_norm = true;  //!< false for the tied copy: the first stage counts that gradient
  //! ZeRO-3: how many groups ahead of the one computing it is gathered within a pass (layers: the
  //! profile's zero3_prefetch_layers; the others 0: gathered when their pass runs, the compute waiting).
  int64_t prefetch_ahead = 0;

  bool Uses(ChunkPass p) const;
};

//! The group a kind's gradient is reduced over: kExpertDp for kExperts, kDpCp for the rest.
ReductionGroup ReducedOver(ParamGroupKind kind);

//! Pipeline rank `pp_rank`'s groups in the order above. `impl` and `precision` change only bytes
//! and prefetch_ahead, never which groups exist or their parameters.
std::vector<ParamGroupDef> RankParamGroups(const ModelSpec& m, const Layout& l, const ImplementationProfile& impl,
                                           Precision precision, int64_t pp_rank);
//! The same for `plan`'s model, layout, implementation and precision.
std::vector<ParamGroupDef> RankParamGroups(const Plan& plan, int64_t pp_rank);
//! Sum of `groups`' parameters (per TP rank, before ZeRO).
int64_t TotalParams(const std::vector<ParamGroupDef>& groups);

//! ZeRO-3: layers gathered ahead of the one computing (ParamGroupDef::prefetch_ahead of a layer).
int64_t LayerPrefetchAhead(const ImplementationProfile& impl);

//! Parameters of one transformer layer per TP rank: column/row-parallel weights and column-parallel
//! biases split over tp; norms and row-parallel biases whole (layer 0's shape).
int64_t LayerParamsPerTpRank(const ModelSpec& m, int64_t tp);
//! The same for layer `layer` without its routed experts (an MoE layer's attention, norms, router and
//! shared experts). MLA's down-projections and latent norms, and the router, are whole on every TP
//! rank (Megatron-Core's multi_latent_attention.py and router.py do not split them).
int64_t LayerParamsPerTpRank(const ModelSpec& m, int64_t tp, int64_t layer);
//! Routed-expert parameters one rank holds in an MoE layer: experts / ep experts, each split over etp
//! (fc1 column-, fc2 row-parallel; fc2's bias whole).
int64_t ExpertParamsPerRank(const ModelSpec& m, const Layout& l);

//! ZeRO-2/3 with one gradient bucket per group: reduce-scatters in flight at once. A group's
//! reduce-scatter waits for the one in flight and folds it into its shard first, so two full
//! transient gradients live at a time: the one being reduced and the one accumulating.
inline constexpr int64_t kReduceScattersInFlight = 1;

//! Acquire rounds of one pass: a pass acquires (ZeRO-3: gathers; ZeRO-2/3 backward: zero-fills)
//! the groups of round 0 in list order, then those of round 1.
inline constexpr int kAcquireRounds = 2;
//! Round in which pass `pass` over chunk `stage` acquires `g`: 0 when it is the group's first use
//! (the embedding's word embedding and positions; the head and a tied copy), 1 when an earlier pass
//! of the forward already read it (the word embedding a one-stage tied head reuses), -1 when the
//! pass does not use it. Layer groups are acquired by their own layer, not by this rule.
int AcquireRound(const ParamGroupDef& g, int64_t stage, ChunkPass pass);
//! Indices into `groups` of the groups outside the layers that `pass` over chunk `stage` acquires,
//! in acquire order.
std::vector<size_t> AcquireOrder(const std::vector<ParamGroupDef>& groups, int64_t stage, ChunkPass pass);

const char* ToString(ParamGroupKind k);

}  // namespace parallax
