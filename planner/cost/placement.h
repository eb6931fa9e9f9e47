#pragma once
// Where a parallel group's ranks sit on the cluster (DESIGN.md "Ranks and groups"): Megatron
// order, rank = tp_idx + tp * (dp_idx + dp * pp_idx), consecutive ranks fill a node first.

#include <cstdint>

#include "model/cluster_spec.h"
#include "model/param_groups.h"
#include "model/plan.h"

namespace parallax::planner {

//! kEp: an MoE layer's expert-parallel group (its token all-to-all); kExpertDp: the ranks holding the
//! same experts (their gradient reduction). Both carved from the stage's tp x dp ranks, etp fastest
//! (model/plan.h ExpertCoordsOf).
enum class GroupKind { kTp, kDp, kPp, kEp, kExpertDp };

struct PlacedGroup {
  int64_t size = 1;            //!< ranks in the group
  int64_t ranks_per_node = 1;  //!< members of the group inside one node
  int64_t nodes = 1;           //!< nodes the group spans
  int64_t gpus_per_node = 1;   //!< of the cluster: groups sharing a node share its NICs
  bool spans_nodes() const { return nodes > 1; }
};

//! The group of kind `kind` for a layout placed on `cluster` (all groups of a kind are alike).
//! For kPp: a whole pipeline (pp ranks, tp*dp apart). Pipeline send/recv is not costed on it:
//! its hops differ (PlacePipelineHop).
PlacedGroup PlaceGroup(const Layout& l, const ClusterSpec& cluster, GroupKind kind);
//! An MoE layer's expert-tensor-parallel group: etp consecutive ranks (placed as a TP group of etp).
PlacedGroup PlaceEtpGroup(const Layout& l, const ClusterSpec& cluster);

//! The rank pairs between pipeline ranks `pp_a` and `pp_b` (every tp_idx, dp_idx sends at once) as
//! a size-2 group: inside a node when every pair is, else across nodes (a hop is as slow as its
//! slowest pair; with tp*dp not dividing gpus_per_node a stage can straddle two nodes).
PlacedGroup PlacePipelineHop(const Layout& l, const ClusterSpec& cluster, int64_t pp_a, int64_t pp_b);

//! The ranks a parameter group's gradient is reduced (and its ZeRO shards gathered) over
//! (model/param_groups.h ParamGroupDef::reduced_over), placed.
PlacedGroup PlaceReduction(const Layout& l, const ClusterSpec& cluster, ReductionGroup group);

using parallax::GlobalRank;  //!< Megatron rank order, model/plan.h

}  // namespace parallax::planner
