#pragma once
// This rank's communicators, one per group of model/rank_groups.h (the rank order and the groups
// are defined there, beside GlobalRank).

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/backend.h"
#include "model/plan.h"
#include "model/rank_groups.h"

namespace parallax::executor {

//! World ranks of the TP / CP / DP / dp x cp / PP group that `rank` belongs to, in group order.
inline std::vector<int> TpGroupRanks(const Layout& l, int64_t rank) { return GroupRanks(l, rank, RankGroup::kTp); }
inline std::vector<int> CpGroupRanks(const Layout& l, int64_t rank) { return GroupRanks(l, rank, RankGroup::kCp); }
inline std::vector<int> DpGroupRanks(const Layout& l, int64_t rank) { return GroupRanks(l, rank, RankGroup::kDp); }
inline std::vector<int> DpCpGroupRanks(const Layout& l, int64_t rank) { return GroupRanks(l, rank, RankGroup::kDpCp); }
inline std::vector<int> PpGroupRanks(const Layout& l, int64_t rank) { return GroupRanks(l, rank, RankGroup::kPp); }

//! This rank's communicators. Created collectively by every rank of `world`.
struct ProcessGroups {
  RankCoords coords;
  int64_t rank = 0;
  Communicator* world = nullptr;  //!< not owned
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> pp;
  //! Context parallel and dp x cp (dense gradient reduction); both null when cp = 1, where the dp
  //! group is the dp x cp group (DpCp()).
  std::unique_ptr<Communicator> cp;
  std::unique_ptr<Communicator> dp_cp;
  Communicator& DpCp() const { return dp_cp ? *dp_cp : *dp; }
  std::unique_ptr<Communicator> embedding;  //!< null unless tied embeddings with pp > 1 on its ends
  //! Mixture of experts (model/rank_groups.h kEp, kExpertDp): the token all-to-all's group and the
  //! expert gradients' reduction group; both null for a dense model.
  std::unique_ptr<Communicator> ep;
  std::unique_ptr<Communicator> expert_dp;
};

//! `moe`: the model has expert layers (the ep and expert-dp groups are created).
Result<ProcessGroups> CreateProcessGroups(const Layout& l, Communicator& world, bool tied_embedding_group,
                                          bool moe = false);

}  // namespace parallax::executor
