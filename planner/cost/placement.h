#pragma once
// Where a parallel group's ranks sit on the cluster (DESIGN.md "Ranks and groups"): Megatron-Core
// order, rank = tp_idx + tp * (cp_idx + cp * (dp_idx + dp * pp_idx)), consecutive ranks fill a node
// first; the groups' shapes are model/rank_groups.h's.

#include <cstdint>

#include "model/cluster_spec.h"
#include "model/param_groups.h"
#include "model/plan.h"
#include "model/rank_groups.h"

namespace parallax::planner {

using GroupKind = RankGroup;  //!< kTp, kCp, kDp, kDpCp, kPp (model/rank_groups.h)

struct PlacedGroup {
  int64_t size = 1;            //!< ranks in the group
  int64_t ranks_per_node = 1;  //!< members of the group inside one node
  int64_t nodes = 1;           //!< nodes the group spans
  int64_t gpus_per_node = 1;   //!< of the cluster: groups sharing a node share its NICs
  bool spans_nodes() const { return nodes > 1; }
};

//! The group of kind `kind` for a layout placed on `cluster` (all groups of a kind are alike).
//! For kPp: a whole pipeline (pp ranks, tp*cp*dp apart). Pipeline send/recv is not costed on it:
//! its hops differ (PlacePipelineHop).
PlacedGroup PlaceGroup(const Layout& l, const ClusterSpec& cluster, GroupKind kind);

//! The rank pairs between pipeline ranks `pp_a` and `pp_b` (every tp_idx, cp_idx, dp_idx sends at
//! once) as a size-2 group: inside a node when every pair is, else across nodes (a hop is as slow as
//! its slowest pair; with tp*cp*dp not dividing gpus_per_node a stage can straddle two nodes).
PlacedGroup PlacePipelineHop(const Layout& l, const ClusterSpec& cluster, int64_t pp_a, int64_t pp_b);

//! The ranks a parameter group's gradient is reduced (and its ZeRO shards gathered) over
//! (model/param_groups.h ParamGroupDef::reduced_over), placed.
PlacedGroup PlaceReduction(const Layout& l, const ClusterSpec& cluster, ReductionGroup group);

using parallax::GlobalRank;  //!< Megatron-Core rank order, model/plan.h

}  // namespace parallax::planner
