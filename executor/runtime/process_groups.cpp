#include "executor/runtime/process_groups.h"

namespace parallax::executor {

Result<ProcessGroups> CreateProcessGroups(const Layout& l, Communicator& world, bool tied_embedding_group, bool moe) {
  ProcessGroups g;
  g.rank = world.rank();
  g.coords = CoordsOf(l, g.rank);
  g.world = &world;
  PX_ASSIGN(g.tp, world.Split(TpGroupRanks(l, g.rank)));
  PX_ASSIGN(g.dp, world.Split(DpGroupRanks(l, g.rank)));
  PX_ASSIGN(g.pp, world.Split(PpGroupRanks(l, g.rank)));
  if (l.cp > 1) {
    PX_ASSIGN(g.cp, world.Split(CpGroupRanks(l, g.rank)));
    PX_ASSIGN(g.dp_cp, world.Split(DpCpGroupRanks(l, g.rank)));
  }
  if (moe) {
    PX_ASSIGN(g.ep, world.Split(GroupRanks(l, g.rank, RankGroup::kEp)));
    PX_ASSIGN(g.expert_dp, world.Split(GroupRanks(l, g.rank, RankGroup::kExpertDp)));
  }
  // Every rank takes part in the split (middle stages form groups of one and drop them).
  auto emb = world.Split(EmbeddingGroupRanks(l, g.rank));
  if (!emb) return emb.error();
  if (tied_embedding_group && l.pp > 1 && (g.coords.pp_idx == 0 || g.coords.pp_idx == l.pp - 1)) {
    g.embedding = std::move(emb).value();
  }
  return g;
}

}  // namespace parallax::executor
