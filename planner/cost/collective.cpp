#include "planner/cost/collective.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parallax::planner {

CollectiveModel::CollectiveModel(const ClusterSpec& cluster, const CostDb* db, DpAlgorithm spanning)
    : cluster_(cluster), db_(db), spanning_(spanning) {
  intra_Bps_ = cluster.intra_node.bandwidth_GBps * 1e9 * kNvlinkEfficiency;
  inter_Bps_ = cluster.inter_node.bandwidth_GBps * 1e9 * kInfinibandEfficiency;
  intra_lat_s_ = cluster.intra_node.latency_us * 1e-6;
  inter_lat_s_ = cluster.inter_node.latency_us * 1e-6;
  nvls_ = cluster.device.arch.nvlink_sharp;
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

namespace {

// NVIDIA/nccl src/graph/tuning.cc (2.8-2.12): latencies in us, [algorithm][protocol],
// algorithms {tree, ring}, protocols {LL, LL128, Simple}.
constexpr double kBaseLat[2][3] = {{4.4, 4.4, 0}, {3.6, 10.0, 8.4}};
constexpr double kNvlinkLat[2][3] = {{0.52, 1.2, 28}, {0.47, 1.9, 3.4}};
constexpr double kNetLat[2][3] = {{5.0, 8.5, 50}, {2.7, 4.0, 9.6}};

}  // namespace

double CollectiveModel::NcclTime(CollectiveKind op, double bytes, int64_t ranks, int64_t nodes, double bus_Bps) {
  if (ranks <= 1) return 0;
  const bool ar = op == CollectiveKind::kAllReduce;
  const double n = static_cast<double>(ranks), N = static_cast<double>(std::max<int64_t>(nodes, 1));
  const double steps = ar ? 2 * (n - 1) : (op == CollectiveKind::kReduceScatter || op == CollectiveKind::kAllGather) ? n - 1 : n;
  const double inter_steps = ar ? 2 * (N - 1) : (op == CollectiveKind::kReduceScatter || op == CollectiveKind::kAllGather) ? N - 1 : N;
  const double bus_GBps = bus_Bps / 1e9;
  double best = std::numeric_limits<double>::infinity();
  for (int p = 0; p < 3; ++p) {
    // Ring: bus bandwidth by protocol (LL: 8-byte lines carry 4 bytes of data, one fourth usable
    // across nodes or for all-reduce, else a third; LL128: 120 of 128 bytes, x0.92).
    double bw = bus_GBps * (p == 0 ? (nodes > 1 || ar ? 0.25 : 1.0 / 3.0) : p == 1 ? 0.92 : 1.0);
    const double intra_lat = kNvlinkLat[1][p] * (nodes > 1 && p == 0 ? 1.8 : 1.0);
    double lat = kBaseLat[1][p] + (steps - inter_steps) * intra_lat + inter_steps * kNetLat[1][p];
    if (ar && p == 2 && nodes > 1 && bytes >= n / 16.0 * 65536) lat *= 1.9;  // ring plateau effect
    const double algbw = bw * n / steps;  // GB/s
    best = std::min(best, lat * 1e-6 + bytes / (algbw * 1e9));
    if (ar && nodes > 1) {
      // Tree (all-reduce): 0.9 of the bus bandwidth (LL 1/3.8, LL128 0.915 of it), algbw half of it.
      double tbw = bus_GBps * 0.9 * (p == 0 ? 1.0 / 3.8 : p == 1 ? 0.915 : 1.0);
      const double ppn = n / N;
      const double tlat = kBaseLat[0][p] + 2 * ((ppn - 1) * kNvlinkLat[0][p] + std::log2(N) * kNetLat[0][p]);
      best = std::min(best, tlat * 1e-6 + bytes / (0.5 * tbw * 1e9));
    }
  }
  return best;
}

double CollectiveModel::NvlsAllReduceTime(double bytes, int64_t ranks, double nvlink_Bps) {
  if (ranks <= 1) return 0;
  const double n = static_cast<double>(ranks);
  // NVIDIA/nccl src/graph/tuning.cc: nvlsEfficiency[Hopper] 0.85; hwLatencies[NVLINK][NVLS][Simple]
  // 25 us (base latency 0); NVLS needs at least two channels (here one per GPU).
  constexpr double kNvlsEfficiency = 0.85;
  constexpr double kNvlsLatencySeconds = 25e-6;
  const double channel_Bps = nvlink_Bps / (n + 1);
  const double busbw = n * channel_Bps * kNvlsEfficiency * (n - 1) / n * 2.0;
  return kNvlsLatencySeconds + bytes * BusFactor(CollectiveKind::kAllReduce, ranks) / busbw;
}

double CollectiveModel::Flat(CollectiveKind op, double bytes, int64_t n, double bw_Bps, double latency_s) const {
  if (n <= 1 && op != CollectiveKind::kSendRecv) return 0;
  // Ring steps: all-reduce 2(n-1), the others (n-1), send/recv 1.
  const double steps = op == CollectiveKind::kAllReduce ? 2.0 * static_cast<double>(n - 1)
                       : op == CollectiveKind::kSendRecv ? 1.0
                                                         : static_cast<double>(n - 1);
  return steps * latency_s + bytes * BusFactor(op, std::max<int64_t>(n, 2)) / bw_Bps;
}

const CollectiveCurve* CollectiveModel::Curve(CollectiveKind op, const PlacedGroup& g, bool host) const {
  if (!db_) return nullptr;
  // The curve of this op and node span at the nearest group size (in log ranks); busbw of a ring
  // or tree changes little with the rank count, the bus factor carries the rest.
  const CollectiveCurve* best = nullptr;
  double best_d = 0;
  for (const auto& c : db_->collectives) {
    if (c.op != op || c.spans_nodes != g.spans_nodes() || c.points.empty() || (c.placement == kHostPlacement) != host) continue;
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

double CollectiveModel::HostTime(CollectiveKind op, double bytes, const PlacedGroup& g) const {
  if (bytes <= 0) return 0;
  if (const CollectiveCurve* c = Curve(op, g, true)) return MeasuredTime(*c, op, bytes, g.size);
  return Time(op, bytes, g);
}

double CollectiveModel::Time(CollectiveKind op, double bytes, const PlacedGroup& g) const {
  if (bytes <= 0) return 0;
  if (g.size <= 1 && op != CollectiveKind::kSendRecv) return 0;
  if (const CollectiveCurve* c = Curve(op, g)) return MeasuredTime(*c, op, bytes, g.size);
  const int64_t k = g.ranks_per_node;
  const double gpn = static_cast<double>(std::max<int64_t>(g.gpus_per_node, 1));
  // This group's share of the node's NICs (the other groups of its kind communicate concurrently).
  const double inter_share_Bps = inter_Bps_ * static_cast<double>(k) / gpn;
  if (op == CollectiveKind::kSendRecv) {
    return g.spans_nodes() ? Flat(op, bytes, 2, inter_Bps_ / gpn, inter_lat_s_) : Flat(op, bytes, 2, intra_Bps_, intra_lat_s_);
  }
  if (!g.spans_nodes()) {
    const double ring = NcclTime(op, bytes, g.size, 1, intra_Bps_);
    if (nvls_ && op == CollectiveKind::kAllReduce) return std::min(ring, NvlsAllReduceTime(bytes, g.size, intra_Bps_));
    return ring;
  }
  if (spanning_ == DpAlgorithm::kNccl && op != CollectiveKind::kAllToAll) {
    // One ring over every rank: its slowest hop is the group's share of the node's NICs.
    return NcclTime(op, bytes, g.size, g.nodes, std::min(intra_Bps_, inter_share_Bps));
  }
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
