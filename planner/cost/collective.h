#pragma once
// Collective cost over a placed group (DESIGN.md "Cost model: collectives").
//
// NCCL's cost model (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel / ncclTopoGetAlgoTime):
// per algorithm (ring; tree for all-reduce) and protocol (LL, LL128, Simple) a latency that grows
// with the ring's steps (intra-node hops at NVLink latency, inter-node hops at network latency;
// the tree's with log2(nodes)) plus bytes over the protocol's share of the bus bandwidth; NCCL
// picks the fastest, so small messages go LL / tree and large ones Simple / ring. The profile's
// DP algorithm may instead ask for the hierarchical form on groups that span nodes.
// Send/recv and the hierarchical form: alpha-beta, time = steps x latency + bytes x busbw_factor /
// bus_bandwidth, with nccl-tests' bus-bandwidth factors (all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (n-1)/n;
// broadcast, send/recv 1). Inside a node the bus bandwidth is the per-GPU NVLink figure; across
// nodes a group gets its share of the node's NICs (ranks_per_node / gpus_per_node of them, all
// groups of a kind communicate at once). A group that spans nodes is hierarchical: intra-node
// reduce-scatter, inter-node collective on 1/k of the data, intra-node all-gather.
// On NVLink SHARP nodes an all-reduce inside the node takes NCCL's NVLS algorithm where its model
// is faster than the ring (from a few MiB up); NVLS across nodes (NVLS-tree) is not modelled.
// With a CostDb curve for (op, spans_nodes) the measured busbw at that message size is used
// (interpolated in log-log between measured sizes; the curve of the nearest group size when the
// exact one was not measured, with the queried group's bus factor).

#include <cstdint>

#include "model/cluster_spec.h"
#include "model/cost_db.h"
#include "model/implementation.h"
#include "planner/cost/placement.h"

namespace parallax::planner {

//! Achievable fraction of NVLink3/4 per-direction bandwidth: NCCL models an A100 NVLink at
//! 20 GB/s of its 25 GB/s (src/graph/topo.h SM80_NVLINK_BW), i.e. protocol + flag overhead.
inline constexpr double kNvlinkEfficiency = 20.0 / 25.0;
//! InfiniBand HDR/NDR: 64b/66b line coding x 4096 B MTU payload over 4122 B with LRH/BTH/CRCs.
inline constexpr double kInfinibandEfficiency = (64.0 / 66.0) * (4096.0 / 4122.0);

class CollectiveModel {
 public:
  //! `db` may be null; it must outlive the model.
  //! `spanning`: how a group that spans nodes runs its collectives (the profile's DP algorithm).
  explicit CollectiveModel(const ClusterSpec& cluster, const CostDb* db = nullptr,
                           DpAlgorithm spanning = DpAlgorithm::kNccl);

  //! Seconds for collective `op` of `bytes` (nccl-tests "size": the full buffer) over `group`.
  //! Host-plane curves (placement "host") are not read here.
  double Time(CollectiveKind op, double bytes, const PlacedGroup& group) const;
  //! The same over the host plane the classic modes exchange on (mailbox messages, the host
  //! all-gather: profiler/calibrate/host_plane_probe.h): the CostDb's host curves, else Time.
  double HostTime(CollectiveKind op, double bytes, const PlacedGroup& group) const;

  //! nccl-tests bus-bandwidth factor for `op` over n ranks.
  static double BusFactor(CollectiveKind op, int64_t n);

  //! NCCL's own cost model (src/graph/tuning.cc): ring with LL / LL128 / Simple, and tree for
  //! all-reduce, each latency + bytes / algbw; NCCL runs the fastest, so the minimum is returned.
  //! `bus_Bps`: the ring's per-rank bus bandwidth (the slowest link it crosses).
  static double NcclTime(CollectiveKind op, double bytes, int64_t ranks, int64_t nodes, double bus_Bps);

  //! NCCL's NVLS all-reduce inside one node (NVLink SHARP: the switch reduces), as its model prices
  //! it (src/graph/search.cc, tuning.cc): one channel per GPU, each GPU's NVLink carrying its own
  //! channel twice and the others' once, so a channel gets `nvlink_Bps` / (ranks + 1); x 0.85
  //! (nvlsEfficiency, Hopper) x (channels - 1) / channels; all-reduce pipelines the reduce and the
  //! multicast (x 2). Latency 25 us. nccl-tests busbw = 1.7 (ranks - 1) nvlink_Bps / (ranks + 1):
  //! 476 GB/s for 8 GPUs at 360 GB/s, as measured on 8x H100 (nccl-tests issue 290).
  static double NvlsAllReduceTime(double bytes, int64_t ranks, double nvlink_Bps);

 private:
  double Flat(CollectiveKind op, double bytes, int64_t n, double bw_Bps, double latency_s) const;
  //! The curve of `op` at the nearest group size and the group's node span: device-plane curves,
  //! or (`host`) host-plane ones.
  const CollectiveCurve* Curve(CollectiveKind op, const PlacedGroup& g, bool host = false) const;
  static double MeasuredTime(const CollectiveCurve& c, CollectiveKind op, double bytes, int64_t n);

  ClusterSpec cluster_;
  const CostDb* db_ = nullptr;
  DpAlgorithm spanning_ = DpAlgorithm::kNccl;
  bool nvls_ = false;      // the node's switches reduce (DeviceSpec Microarch::nvlink_sharp)
  double intra_Bps_ = 0;   // per GPU, one direction, achievable
  double inter_Bps_ = 0;   // per node, one direction, achievable
  double intra_lat_s_ = 0;
  double inter_lat_s_ = 0;
};

}  // namespace parallax::planner
