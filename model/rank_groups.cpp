#include "model/rank_groups.h"

namespace parallax {

GroupShape ShapeOf(const Layout& l, RankGroup g) {
  switch (g) {
    case RankGroup::kTp: return {.size = l.tp, .stride = 1};
    case RankGroup::kCp: return {.size = l.cp, .stride = l.tp};
    case RankGroup::kDp: return {.size = l.dp, .stride = l.tp * l.cp};
    case RankGroup::kDpCp: return {.size = l.dp * l.cp, .stride = l.tp};
    case RankGroup::kPp: return {.size = l.pp, .stride = l.tp * l.cp * l.dp};
    case RankGroup::kEp: return {.size = l.ep, .stride = l.expert_tp()};
    case RankGroup::kExpertDp: return {.size = l.expert_dp(), .stride = l.expert_tp() * l.ep};
  }
  return {};
}

int64_t IndexInGroup(const Layout& l, const RankCoords& c, RankGroup g) {
  switch (g) {
    case RankGroup::kTp: return c.tp_idx;
    case RankGroup::kCp: return c.cp_idx;
    case RankGroup::kDp: return c.dp_idx;
    case RankGroup::kDpCp: return c.cp_idx + l.cp * c.dp_idx;
    case RankGroup::kPp: return c.pp_idx;
    case RankGroup::kEp: return ExpertCoordsOf(l, c.tp_idx, c.cp_idx, c.dp_idx).ep_idx;
    case RankGroup::kExpertDp: return ExpertCoordsOf(l, c.tp_idx, c.cp_idx, c.dp_idx).edp_idx;
  }
  return 0;
}

std::vector<int> GroupRanks(const Layout& l, int64_t rank, RankGroup g) {
  const GroupShape shape = ShapeOf(l, g);
  const int64_t first = rank - IndexInGroup(l, CoordsOf(l, rank), g) * shape.stride;
  std::vector<int> out;
  out.reserve(static_cast<size_t>(shape.size));
  for (int64_t i = 0; i < shape.size; ++i) out.push_back(static_cast<int>(first + i * shape.stride));
  return out;
}

std::vector<int> EmbeddingGroupRanks(const Layout& l, int64_t rank) {
  const RankCoords c = CoordsOf(l, rank);
  if (l.pp == 1 || (c.pp_idx != 0 && c.pp_idx != l.pp - 1)) return {static_cast<int>(rank)};
  RankCoords first = c, last = c;
  first.pp_idx = 0;
  last.pp_idx = l.pp - 1;
  return {static_cast<int>(RankOf(l, first)), static_cast<int>(RankOf(l, last))};
}

RankGroup RankGroupOf(ReductionGroup g) {
  switch (g) {
    case ReductionGroup::kDpCp: return RankGroup::kDpCp;
    case ReductionGroup::kExpertDp: return RankGroup::kExpertDp;
  }
  return RankGroup::kDpCp;
}

}  // namespace parallax
