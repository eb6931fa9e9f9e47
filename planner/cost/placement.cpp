#include "planner/cost/placement.h"

#include <algorithm>
#include <map>

namespace parallax::planner {
namespace {

//! The group with the most domains (ties: the fewest members in one) among every group of `kind`,
//! found by listing their ranks: for a job whose last NVLink domain is partial, where the groups of a
//! kind are not alike.
PlacedGroup WorstGroup(const Layout& l, const ClusterSpec& cluster, GroupKind kind) {
  PlacedGroup worst;
  bool first = true;
  auto consider = [&](const PlacedGroup& p) {
    if (first || p.nodes > worst.nodes || (p.nodes == worst.nodes && p.ranks_per_node < worst.ranks_per_node)) worst = p;
    first = false;
  };
  switch (kind) {
    case GroupKind::kTp:
      for (int64_t d = 0; d < l.dp * l.pp; ++d) consider(PlaceRanks(cluster, d * l.tp, l.tp, 1));
      break;
    case GroupKind::kDp:
      for (int64_t p = 0; p < l.pp; ++p) {
        for (int64_t t = 0; t < l.tp; ++t) consider(PlaceRanks(cluster, GlobalRank(l, t, 0, p), l.dp, l.tp));
      }
      break;
    case GroupKind::kPp:
      for (int64_t i = 0; i < l.tp * l.dp; ++i) consider(PlaceRanks(cluster, i, l.pp, l.tp * l.dp));
      break;
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
  int64_t stride = 1;  // rank distance between consecutive members
  switch (kind) {
    case GroupKind::kTp: p.size = l.tp; stride = 1; break;
    case GroupKind::kDp: p.size = l.dp; stride = l.tp; break;
    case GroupKind::kPp: p.size = l.pp; stride = l.tp * l.dp; break;
  }
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

PlacedGroup PlacePipelineHop(const Layout& l, const ClusterSpec& cluster, int64_t pp_a, int64_t pp_b) {
  bool crosses = false;
  for (int64_t d = 0; d < l.dp && !crosses; ++d) {
    for (int64_t t = 0; t < l.tp && !crosses; ++t) {
      crosses = cluster.DomainOf(GlobalRank(l, t, d, pp_a)) != cluster.DomainOf(GlobalRank(l, t, d, pp_b));
    }
  }
  PlacedGroup p;
  p.size = 2;
  p.gpus_per_node = std::max<int64_t>(cluster.gpus_per_node, 1);
  p.ranks_per_node = crosses ? 1 : 2;
  p.nodes = crosses ? 2 : 1;
  return p;
}

PlacedGroup PlaceReduction(const Layout& l, const ClusterSpec& cluster, ReductionGroup group) {
  switch (group) {
    case ReductionGroup::kDp: return PlaceGroup(l, cluster, GroupKind::kDp);
  }
  return PlaceGroup(l, cluster, GroupKind::kDp);
}

}  // namespace parallax::planner
