#pragma once
// The parallel groups of a layout, derived from the rank order (GlobalRank, model/plan.h): one
// definition for the executor's communicators and the planner's placement. In Megatron-Core's
// order (tp fastest, then cp, dp, pp) every group is a run of ranks a fixed stride apart, and so
// is dp x cp (cp and dp are neighbours in the order): the group over which dense weights'
// gradients are reduced and their ZeRO shards split (Megatron-Core's data-parallel group "with
// context parallel", parallel_state.get_data_parallel_group(with_context_parallel=True)).

#include <cstdint>
#include <vector>

#include "model/param_groups.h"
#include "model/plan.h"

namespace parallax {

//! kEp: an MoE layer's expert-parallel group (its token all-to-all); kExpertDp: the ranks holding the
//! same experts (their gradient reduction). Both are carved from the stage's tp x cp x dp ranks, etp
//! fastest (model/plan.h ExpertCoordsOf), so each is a run of ranks a fixed stride apart too.
enum class RankGroup { kTp, kCp, kDp, kDpCp, kPp, kEp, kExpertDp };

//! A group's members: `size` ranks, `stride` apart in the rank order.
struct GroupShape {
  int64_t size = 1;
  int64_t stride = 1;
};
GroupShape ShapeOf(const Layout& l, RankGroup g);

//! The position in its group of kind `g` (0 .. size-1; in dp x cp: cp_idx + cp * dp_idx) of the
//! rank at `c`.
int64_t IndexInGroup(const Layout& l, const RankCoords& c, RankGroup g);
//! World ranks of the group of kind `g` that `rank` belongs to, in group order.
std::vector<int> GroupRanks(const Layout& l, int64_t rank, RankGroup g);
//! First and last pipeline rank with the same (tp, cp, dp) index: they hold the tied word embedding.
std::vector<int> EmbeddingGroupRanks(const Layout& l, int64_t rank);

//! The rank group a parameter group's reduction runs over (model/param_groups.h ReductionGroup).
RankGroup RankGroupOf(ReductionGroup g);

//! Ranks a dense weight's gradient is reduced over and its ZeRO shards split over: dp * cp. Data
//! parallel collectives, ZeRO shards and passes exist only when it is above 1.
inline int64_t DenseReductionRanks(const Layout& l) { return ShapeOf(l, RankGroup::kDpCp).size; }

}  // namespace parallax
