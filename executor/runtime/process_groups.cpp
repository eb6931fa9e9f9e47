#include "executor/runtime/process_groups.h"

namespace parallax::executor {

RankCoords CoordsOf(const Layout& l, int64_t rank) {
  RankCoords c;
  c.tp_idx = rank % l.tp;
  c.dp_idx = (rank / l.tp) % l.dp;
  c.pp_idx = rank / (l.tp * l.dp);
  return c;
}

int64_t RankOf(const Layout& l, const RankCoords& c) { return GlobalRank(l, c.tp_idx, c.dp_idx, c.pp_idx); }

namespace {

//! The ranks that share every coordinate of `rank` but `axis`, in order along `axis` (size `n`).
std::vector<int> GroupAlong(const Layout& l, int64_t rank, int64_t RankCoords::*axis, int64_t n) {
  RankCoords c = CoordsOf(l, rank);
  std::vector<int> out;
  for (c.*axis = 0; c.*axis < n; ++(c.*axis)) out.push_back(static_cast<int>(RankOf(l, c)));
  return out;
}

}  // namespace

std::vector<int> TpGroupRanks(const Layout& l, int64_t rank) { return GroupAlong(l, rank, &RankCoords::tp_idx, l.tp); }
std::vector<int> DpGroupRanks(const Layout& l, int64_t rank) { return GroupAlong(l, rank, &RankCoords::dp_idx, l.dp); }
std::vector<int> PpGroupRanks(const Layout& l, int64_t rank) { return GroupAlong(l, rank, &RankCoords::pp_idx, l.pp); }

std::vector<int> EmbeddingGroupRanks(const Layout& l, int64_t rank) {
  RankCoords c = CoordsOf(l, rank);
  if (c.pp_idx != 0 && c.pp_idx != l.pp - 1) return {static_cast<int>(rank)};
  RankCoords first = c, last = c;
  first.pp_idx = 0;
  last.pp_idx = l.pp - 1;
  if (l.pp == 1) return {static_cast<int>(rank)};
  return {static_cast<int>(RankOf(l, first)), static_cast<int>(RankOf(l, last))};
}

Result<ProcessGroups> CreateProcessGroups(const Layout& l, Communicator& world, bool tied_embedding_group) {
  ProcessGroups g;
  g.rank = world.rank();
  g.coords = CoordsOf(l, g.rank);
  g.world = &world;
  PX_ASSIGN(g.tp, world.Split(TpGroupRanks(l, g.rank)));
  PX_ASSIGN(g.dp, world.Split(DpGroupRanks(l, g.rank)));
  PX_ASSIGN(g.pp, world.Split(PpGroupRanks(l, g.rank)));
  // Every rank takes part in the split (middle stages form groups of one and drop them).
  auto emb = world.Split(EmbeddingGroupRanks(l, g.rank));
  if (!emb) return emb.error();
  if (tied_embedding_group && l.pp > 1 && (g.coords.pp_idx == 0 || g.coords.pp_idx == l.pp - 1)) {
    g.embedding = std::move(emb).value();
  }
  return g;
}

}  // namespace parallax::executor
