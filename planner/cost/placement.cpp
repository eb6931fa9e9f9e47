#include "planner/cost/placement.h"

#include <algorithm>

namespace parallax::planner {

PlacedGroup PlaceGroup(const Layout& l, const ClusterSpec& cluster, GroupKind kind) {
  const int64_t g = std::max<int64_t>(cluster.gpus_per_node, 1);
  PlacedGroup p;
  p.gpus_per_node = g;
  int64_t stride = 1;  // rank distance between consecutive members
  switch (kind) {
    case GroupKind::kTp: p.size = l.tp; stride = 1; break;
    case GroupKind::kDp: p.size = l.dp; stride = l.tp; break;
    case GroupKind::kPp: p.size = l.pp; stride = l.tp * l.dp; break;
    case GroupKind::kEp: p.size = l.ep; stride = l.expert_tp(); break;
    case GroupKind::kExpertDp: p.size = l.expert_dp(); stride = l.expert_tp() * l.ep; break;
  }
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

PlacedGroup PlaceEtpGroup(const Layout& l, const ClusterSpec& cluster) {
  Layout etp = l;
  etp.tp = l.expert_tp();
  return PlaceGroup(etp, cluster, GroupKind::kTp);
}

PlacedGroup PlacePipelineHop(const Layout& l, const ClusterSpec& cluster, int64_t pp_a, int64_t pp_b) {
  const int64_t g = std::max<int64_t>(cluster.gpus_per_node, 1);
  bool crosses = false;
  for (int64_t d = 0; d < l.dp && !crosses; ++d) {
    for (int64_t t = 0; t < l.tp && !crosses; ++t) {
      crosses = GlobalRank(l, t, d, pp_a) / g != GlobalRank(l, t, d, pp_b) / g;
    }
  }
  PlacedGroup p;
  p.size = 2;
  p.gpus_per_node = g;
  p.ranks_per_node = crosses ? 1 : 2;
  p.nodes = crosses ? 2 : 1;
  return p;
}

PlacedGroup PlaceReduction(const Layout& l, const ClusterSpec& cluster, ReductionGroup group) {
  switch (group) {
    case ReductionGroup::kDp: return PlaceGroup(l, cluster, GroupKind::kDp);
    case ReductionGroup::kExpertDp: return PlaceGroup(l, cluster, GroupKind::kExpertDp);
  }
  return PlaceGroup(l, cluster, GroupKind::kDp);
}

}  // namespace parallax::planner
