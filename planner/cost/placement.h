#pragma once
// Where a parallel group's ranks sit on the cluster (DESIGN.md "Ranks and groups"): Megatron-Core
// order, rank = tp_idx + tp * (cp_idx + cp * (dp_idx + dp * pp_idx)), consecutive ranks fill a node
// first and an NVLink domain (ClusterSpec::domain_size) before the next; the groups' shapes are
// model/rank_groups.h's. What decides NVLink or the NICs is the domain, not the node: a group inside
// one domain communicates over NVLink even when it spans the compute trays of a GB200 NVL72 rack; a
// group that fits inside one domain is placed inside one.

#include <cstdint>

#include "model/cluster_spec.h"
#include "model/param_groups.h"
#include "model/plan.h"
#include "model/rank_groups.h"

namespace parallax::planner {

using GroupKind = RankGroup;  //!< kTp, kCp, kDp, kDpCp, kPp, kEp, kExpertDp (model/rank_groups.h)

struct PlacedGroup {
  int64_t size = 1;            //!< ranks in the group
  int64_t ranks_per_node = 1;  //!< members of the group inside one NVLink domain (the fewest, if uneven)
  int64_t nodes = 1;           //!< NVLink domains the group spans (nodes where a domain is a node)
  int64_t gpus_per_node = 1;   //!< of the cluster: groups sharing a node share its NICs
  bool spans_nodes() const { return nodes > 1; }
};

//! The group of kind `kind` for a layout placed on `cluster` (all groups of a kind are alike).
//! For kPp: a whole pipeline (pp ranks, tp*cp*dp apart). Pipeline send/recv is not costed on it:
//! its hops differ (PlacePipelineHop).
PlacedGroup PlaceGroup(const Layout& l, const ClusterSpec& cluster, GroupKind kind);
//! An MoE layer's expert-tensor-parallel group: etp consecutive ranks (placed as a TP group of etp).
PlacedGroup PlaceEtpGroup(const Layout& l, const ClusterSpec& cluster);

//! The rank pairs between pipeline ranks `pp_a` and `pp_b` (every tp_idx, cp_idx, dp_idx sends at
//! once) as a size-2 group: inside a domain when every pair is, else across domains (a hop is as
//! slow as its slowest pair; with tp*cp*dp not dividing the domain a stage can straddle two).
PlacedGroup PlacePipelineHop(const Layout& l, const ClusterSpec& cluster, int64_t pp_a, int64_t pp_b);

//! The ranks a parameter group's gradient is reduced (and its ZeRO shards gathered) over
//! (model/param_groups.h ParamGroupDef::reduced_over), placed.
PlacedGroup PlaceReduction(const Layout& l, const ClusterSpec& cluster, ReductionGroup group);

//! `size` ranks `stride` apart from rank `first` on `cluster`'s NVLink domains: the domains they span
//! and the fewest of them inside one (what `cluster show` reports for a group of a given size).
PlacedGroup PlaceRanks(const ClusterSpec& cluster, int64_t first, int64_t size, int64_t stride);

using parallax::GlobalRank;  //!< Megatron-Core rank order, model/plan.h

}  // namespace parallax::planner
