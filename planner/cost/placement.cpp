#include "planner/cost/placement.h"

#include <algorithm>

namespace parallax::planner {

PlacedGroup PlaceGroup(const Layout& l, const ClusterSpec& cluster, GroupKind kind) {
  const int64_t g = std::max<int64_t>(cluster.gpus_per_node, 1);
  PlacedGroup p;
  p.gpus_per_node = g;
  const GroupShape shape = ShapeOf(l, kind);
  const int64_t stride = shape.stride;  // rank distance between consecutive members
  p.size = shape.size;
  if (stride >= g) {
    p.ranks_per_node = 1;
    p.nodes = p.size;
  } else {
    // Members stride apart: g / stride of them share a node (stride divides g for tp | g).
    p.ranks_per_node = std::min(p.size, std::max<int64_t>(g / stride, 1));
    p.nodes = (p.size + p.ranks_per_node - 1) / p.ranks_per_node;
  }
  return p;
}

PlacedGroup PlacePipelineHop(const Layout& l, const ClusterSpec& cluster, int64_t pp_a, int64_t pp_b) {
  const int64_t g = std::max<int64_t>(cluster.gpus_per_node, 1);
  bool crosses = false;
  // A pipeline rank's ranks are the `stride` ranks from GlobalRank(0, 0, 0, pp_idx); each sends to
  // the rank with the same other coordinates, (pp_b - pp_a) strides away.
  const int64_t stride = ShapeOf(l, RankGroup::kPp).stride;
  const int64_t first = GlobalRank(l, 0, 0, 0, pp_a);
  for (int64_t r = first; r < first + stride && !crosses; ++r) {
    crosses = r / g != (r + (pp_b - pp_a) * stride) / g;
  }
  PlacedGroup p;
  p.size = 2;
  p.gpus_per_node = g;
  p.ranks_per_node = crosses ? 1 : 2;
  p.nodes = crosses ? 2 : 1;
  return p;
}

PlacedGroup PlaceReduction(const Layout& l, const ClusterSpec& cluster, ReductionGroup group) {
  return PlaceGroup(l, cluster, RankGroupOf(group));
}

}  // namespace parallax::planner
