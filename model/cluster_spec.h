#pragma once
// ClusterSpec: nodes of identical devices joined by an intra-node and an inter-node network. The
// intra-node figures are those of the NVLink fabric, which may join several nodes (one NVLink domain:
// a GB200 NVL72 rack joins 18 four-GPU compute trays).

#include <string>

#include "model/device_spec.h"
#include "model/json_io.h"
#include "model/reliability.h"

namespace parallax {

struct LinkSpec {
  double bandwidth_GBps = 0;  //!< one direction; intra: per GPU, inter: per node
  double latency_us = 0;
};

struct ClusterSpec {
  std::string name;
  int64_t nodes = 1;
  int64_t gpus_per_node = 1;
  DeviceSpec device;
  LinkSpec intra_node;
  LinkSpec inter_node;
  //! GPUs of the job on one NVLink fabric; 0 = gpus_per_node (every node its own fabric). Domains are
  //! contiguous blocks of ranks (rank / domain size), the last one possibly partial. Traffic inside a
  //! domain runs over the intra_node links, between domains over the nodes' NICs (inter_node).
  int64_t nvlink_domain = 0;
  StragglerSpec stragglers;  //!< optional "stragglers": slow ranks/nodes and per-step jitter
  FailureSpec failures;      //!< optional "failures": MTBF and checkpoint costs

  int64_t total_gpus() const { return nodes * gpus_per_node; }
  //! GPUs per NVLink domain (nvlink_domain, else gpus_per_node): the one definition the planner's
  //! placement, the layout rules and `cluster show` read.
  int64_t domain_size() const { return nvlink_domain > 0 ? nvlink_domain : gpus_per_node; }
  //! The NVLink domain of global rank `rank` (ranks fill a domain before the next).
  int64_t DomainOf(int64_t rank) const { return rank / domain_size(); }
};

Result<ClusterSpec> ClusterFromJson(const Json& j, const std::string& file, const std::string& path = "");
Json ClusterToJson(const ClusterSpec& c);
Result<ClusterSpec> LoadClusterFile(const std::string& path);

}  // namespace parallax
