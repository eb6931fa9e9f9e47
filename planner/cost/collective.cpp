#include "planner/cost/collective.h"

#include <algorithm>
#include <cmath>

namespace parallax::planner {

CollectiveModel::CollectiveModel(const ClusterSpec& cluster, const CostDb* db) : cluster_(cluster), db_(db) {
  intra_Bps_ = cluster.intra_node.bandwidth_GBps * 1e9 * kNvlinkEfficiency;
  inter_Bps_ = cluster.inter_node.bandwidth_GBps * 1e9 * kInfinibandEfficiency;
  intra_lat_s_ = cluster.intra_node.latency_us * 1e-6;
  inter_lat_s_ = cluster.inter_node.latency_us * 1e-6;
}

double CollectiveModel::BusFactor(CollectiveKind op, int64_t n) {
  const double dn = static_cast<double>(n);
  switch (op) {
    case CollectiveKind::kAllReduce: return 2.0 * (dn - 1) / dn;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll: return (dn - 1) / dn;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kSendRecv: return 1.0;
  }
  return 1.0;
}

double CollectiveModel::Flat(CollectiveKind op, double bytes, int64_t n, double bw_Bps, double latency_s) const {
  if (n <= 1 && op != CollectiveKind::kSendRecv) return 0;
  // Ring steps: all-reduce 2(n-1), the others (n-1), send/recv 1.
  const double steps = op == CollectiveKind::kAllReduce ? 2.0 * static_cast<double>(n - 1)
                       : op == CollectiveKind::kSendRecv ? 1.0
                                                         : static_cast<double>(n - 1);
  return steps * latency_s + bytes * BusFactor(op, std::max<int64_t>(n, 2)) / bw_Bps;
}

const CollectiveCurve* CollectiveModel::Curve(CollectiveKind op, const PlacedGroup& g) const {
  if (!db_) return nullptr;
  for (const auto& c : db_->collectives) {
    if (c.op == op && c.group_size == g.size && c.spans_nodes == g.spans_nodes() && !c.points.empty()) return &c;
  }
  return nullptr;
}

double CollectiveModel::Time(CollectiveKind op, double bytes, const PlacedGroup& g) const {
  if (bytes <= 0) return 0;
  if (g.size <= 1 && op != CollectiveKind::kSendRecv) return 0;
  if (const CollectiveCurve* c = Curve(op, g)) {
    // Measured busbw, linear in log(bytes) between neighbours; time from nccl-tests' definition.
    const auto& pts = c->points;
    auto it = std::lower_bound(pts.begin(), pts.end(), bytes,
                               [](const CollectivePoint& p, double b) { return static_cast<double>(p.bytes) < b; });
    if (it == pts.begin()) return pts.front().time_s * std::max(1.0, bytes / static_cast<double>(pts.front().bytes));
    if (it == pts.end()) return bytes * BusFactor(op, g.size) / (pts.back().busbw_GBps * 1e9);
    const auto& hi = *it;
    const auto& lo = *(it - 1);
    const double f = (std::log(bytes) - std::log(static_cast<double>(lo.bytes))) /
                     (std::log(static_cast<double>(hi.bytes)) - std::log(static_cast<double>(lo.bytes)));
    const double t_lo = lo.time_s, t_hi = hi.time_s;
    return std::exp(std::log(t_lo) + f * (std::log(t_hi) - std::log(t_lo)));
  }
  const int64_t k = g.ranks_per_node;
  const double gpn = static_cast<double>(std::max<int64_t>(g.gpus_per_node, 1));
  // This group's share of the node's NICs (the other groups of its kind communicate concurrently).
  const double inter_share_Bps = inter_Bps_ * static_cast<double>(k) / gpn;
  if (!g.spans_nodes()) return Flat(op, bytes, g.size, intra_Bps_, intra_lat_s_);
  if (op == CollectiveKind::kSendRecv) return Flat(op, bytes, 2, inter_Bps_ / gpn, inter_lat_s_);
  const int64_t nodes = g.nodes;
  switch (op) {
    case CollectiveKind::kAllReduce:
      // Intra reduce-scatter, inter all-reduce of 1/k per GPU (k GPUs in parallel), intra all-gather.
      return Flat(CollectiveKind::kReduceScatter, bytes, k, intra_Bps_, intra_lat_s_) +
             Flat(CollectiveKind::kAllReduce, bytes / static_cast<double>(k), nodes, inter_share_Bps / static_cast<double>(k),
                  inter_lat_s_) +
             Flat(CollectiveKind::kAllGather, bytes, k, intra_Bps_, intra_lat_s_);
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
      return Flat(op, bytes, k, intra_Bps_, intra_lat_s_) +
             Flat(op, bytes / static_cast<double>(k), nodes, inter_share_Bps / static_cast<double>(k), inter_lat_s_);
    case CollectiveKind::kAllToAll: {
      // The (n-k)/n of each rank's data that leaves the node crosses the NICs; the rest NVLink.
      const double n = static_cast<double>(g.size);
      const double inter = bytes * (n - static_cast<double>(k)) / n / (inter_share_Bps / static_cast<double>(k));
      const double intra = bytes * (static_cast<double>(k) - 1) / n / intra_Bps_;
      return std::max(inter, intra) + static_cast<double>(g.size - 1) * inter_lat_s_;
    }
    case CollectiveKind::kBroadcast:
      return Flat(op, bytes, nodes, inter_share_Bps, inter_lat_s_) + Flat(op, bytes, k, intra_Bps_, intra_lat_s_);
    case CollectiveKind::kSendRecv: break;
  }
  return 0;
}

}  // namespace parallax::planner
