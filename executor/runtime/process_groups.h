#pragma once
// Rank layout in Megatron order (DESIGN.md "Ranks and groups"):
// rank = tp_idx + tp * (dp_idx + dp * pp_idx), and the communicators of this rank's groups.

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/backend.h"
#include "model/plan.h"

namespace parallax::executor {

struct RankCoords {
  int64_t tp_idx = 0;
  int64_t dp_idx = 0;
  int64_t pp_idx = 0;
};

RankCoords CoordsOf(const Layout& l, int64_t rank);
int64_t RankOf(const Layout& l, const RankCoords& c);
//! World ranks of the TP / DP / PP group that `rank` belongs to, in group order.
std::vector<int> TpGroupRanks(const Layout& l, int64_t rank);
std::vector<int> DpGroupRanks(const Layout& l, int64_t rank);
std::vector<int> PpGroupRanks(const Layout& l, int64_t rank);
//! First and last pipeline rank with the same (dp, tp) index: they hold the tied word embedding.
std::vector<int> EmbeddingGroupRanks(const Layout& l, int64_t rank);

//! This rank's communicators. Created collectively by every rank of `world`.
struct ProcessGroups {
  RankCoords coords;
  int64_t rank = 0;
  Communicator* world = nullptr;  //!< not owned
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> embedding;  //!< null unless tied embeddings with pp > 1 on its ends
};

Result<ProcessGroups> CreateProcessGroups(const Layout& l, Communicator& world, bool tied_embedding_group);

}  // namespace parallax::executor
