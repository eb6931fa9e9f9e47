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
  // The curve of this op and node span at the nearest group size (in log ranks); busbw of a ring
  // or tree changes little with the rank count, the bus factor carries the rest.
  const CollectiveCurve* best = nullptr;
  double best_d = 0;
  for (const auto& c : db_->collectives) {
    if (c.op != op || c.spans_nodes != g.spans_nodes() || c.points.empty()) continue;
    const double d = std::abs(std::log(static_cast<double>(c.group_size)) - std::log(static_cast<double>(g.size)));
    if (!best || d < best_d) {
      best = &c;
      best_d = d;
    }
  }
  return best;
}

double CollectiveModel::MeasuredTime(const CollectiveCurve& c, CollectiveKind op, double bytes, int64_t n) {
  // Bus bandwidth of each point from its time (nccl-tests: algbw = size / time, busbw = algbw x
  // factor), interpolated linearly in log(bytes) in log(busbw), flat beyond the ends; below the
  // smallest size the smallest measured time is a latency floor.
  const auto& pts = c.points;
  const double f_curve = BusFactor(op, c.group_size);
  const double f_query = BusFactor(op, std::max<int64_t>(n, 2));
  auto busbw = [&](const CollectivePoint& p) { return static_cast<double>(p.bytes) * f_curve / p.time_s; };
  double bw = 0;
  if (bytes <= static_cast<double>(pts.front().bytes)) {
    bw = busbw(pts.front());
    return std::max(pts.front().time_s * f_query / f_curve, bytes * f_query / bw);
  }
  if (bytes >= static_cast<double>(pts.back().bytes)) {
    bw = busbw(pts.back());
  } else {
    const auto hi = std::lower_bound(pts.begin(), pts.end(), bytes,
                                     [](const CollectivePoint& p, double b) { return static_cast<double>(p.bytes) < b; });
    const auto lo = hi - 1;
    const double f = (std::log(bytes) - std::log(static_cast<double>(lo->bytes))) /
                     (std::log(static_cast<double>(hi->bytes)) - std::log(static_cast<double>(lo->bytes)));
    bw = std::exp(std::log(busbw(*lo)) + f * (std::log(busbw(*hi)) - std::log(busbw(*lo))));
  }
  return bytes * f_query / bw;
}

double CollectiveModel::Time(CollectiveKind op, double bytes, const PlacedGroup& g) const {
  if (bytes <= 0) return 0;
  if (g.size <= 1 && op != CollectiveKind::kSendRecv) return 0;
  if (const CollectiveCurve* c = Curve(op, g)) return MeasuredTime(*c, op, bytes, g.size);
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
