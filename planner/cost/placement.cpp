#include "planner/cost/placement.h"

#include <algorithm>
#include <map>

namespace parallax::planner {
namespace {

//! The group with the most domains (ties: the fewest members in one) among every group of `kind`,
//! found by listing their ranks: for a job whose last NVLink domain is partial, where the groups of a
//! kind are not alike. In the rank order every group is `size` ranks `stride` apart
//! (model/rank_groups.h), and its first member is a rank whose index in it is 0.
PlacedGroup WorstGroup(const Layout& l, const ClusterSpec& cluster, GroupKind kind) {
  const GroupShape s = ShapeOf(l, kind);
  PlacedGroup worst;
  bool first = true;
  for (int64_t r = 0; r < l.world_size(); ++r) {
    if ((r / s.stride) % s.size != 0) continue;
    const PlacedGroup p = PlaceRanks(cluster, r, s.size, s.stride);
    if (first || p.nodes > worst.nodes || (p.nodes == worst.nodes && p.ranks_per_node < worst.ranks_per_node)) worst = p;
    first = false;
  }
  return worst;
}

}  // namespace

PlacedGroup PlaceRanks(const ClusterSpec& cluster, int64_t first, int64_t size, int64_t stride) {
  std::map<int64_t, int64_t> per_domain;
  for (int64_t i = 0; i < size; ++i) ++per_domain[cluster.DomainOf(first + i * stride)];
  PlacedGroup p;
  p.size = size;
  p.gpus_per_node = std::max<int64_t>(cluster.gpus_per_node, 1);
  p.nodes = static_cast<int64_t>(per_domain.size());
  p.ranks_per_node = size;
  for (const auto& [domain, members] : per_domain) p.ranks_per_node = std::min(p.ranks_per_node, members);
  return p;
}

PlacedGroup PlaceGroup(const Layout& l, const ClusterSpec& cluster, GroupKind kind) {
  const int64_t g = std::max<int64_t>(cluster.domain_size(), 1);
  if (l.world_size() % g != 0) return WorstGroup(l, cluster, kind);
  PlacedGroup p;
  p.gpus_per_node = std::max<int64_t>(cluster.gpus_per_node, 1);
  const GroupShape shape = ShapeOf(l, kind);
  const int64_t stride = shape.stride;  // rank distance between consecutive members
  p.size = shape.size;
  if (stride >= g) {
    p.ranks_per_node = 1;
    p.nodes = p.size;
  } else {
    // Members stride apart: g / stride of them share a domain (stride divides g for tp | g).
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
  bool crosses = false;
  // A pipeline rank's ranks are the `stride` ranks from GlobalRank(0, 0, 0, pp_idx); each sends to
  // the rank with the same other coordinates, (pp_b - pp_a) strides away.
  const int64_t stride = ShapeOf(l, RankGroup::kPp).stride;
  const int64_t first = GlobalRank(l, 0, 0, 0, pp_a);
  for (int64_t r = first; r < first + stride && !crosses; ++r) {
    crosses = cluster.DomainOf(r) != cluster.DomainOf(r + (pp_b - pp_a) * stride);
  }
  PlacedGroup p;
  p.size = 2;
  p.gpus_per_node = std::max<int64_t>(cluster.gpus_per_node, 1);
  p.ranks_per_node = crosses ? 1 : 2;
  p.nodes = crosses ? 2 : 1;
  return p;
}

PlacedGroup PlaceReduction(const Layout& l, const ClusterSpec& cluster, ReductionGroup group) {
  return PlaceGroup(l, cluster, RankGroupOf(group));
}

}  // namespace parallax::planner
