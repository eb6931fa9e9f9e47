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
  //! CPU nodes (the CPU backend, one rank per "GPU"): the CPUs the node's ranks share; 0 = every rank
  //! has its device to itself (GPUs). `calibrate --backend cpu` writes it. Ranks beyond it time-share
  //! the CPUs (CoreShare).
  int64_t cpus_per_node = 0;
  StragglerSpec stragglers;  //!< optional "stragglers": slow ranks/nodes and per-step jitter
  FailureSpec failures;      //!< optional "failures": MTBF and checkpoint costs

  int64_t total_gpus() const { return nodes * gpus_per_node; }
  //! GPUs per NVLink domain (nvlink_domain, else gpus_per_node): the one definition the planner's
  //! placement, the layout rules and `cluster show` read.
  int64_t domain_size() const { return nvlink_domain > 0 ? nvlink_domain : gpus_per_node; }
  //! The NVLink domain of global rank `rank` (ranks fill a domain before the next).
  int64_t DomainOf(int64_t rank) const { return rank / domain_size(); }

  //! How much longer a rank's compute takes when `busy` ranks of one node compute at once on its
  //! cpus_per_node CPUs (1 when they fit, or on GPUs). The operating system runs each CPU's ranks in
  //! turn and spreads the ranks over the CPUs as evenly as it can, so the most crowded CPU holds
  //! ceil(busy / cpus) of them; ranks that wait for each other (a synchronous step) go at its pace.
  //! Measured on the 2-CPU VM (docs/classic_modes.md): 4 sequences per worker stepped in 2.49 ms at
  //! 2 workers, 5.19 at 3 and 5.33 at 4, i.e. 2.1x at 3 ranks, not the 1.5x an even share predicts.
  double SlowestCoreShare(int64_t busy) const;
};

Result<ClusterSpec> ClusterFromJson(const Json& j, const std::string& file, const std::string& path = "");
Json ClusterToJson(const ClusterSpec& c);
Result<ClusterSpec> LoadClusterFile(const std::string& path);

}  // namespace parallax
