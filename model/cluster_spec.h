#pragma once
// ClusterSpec: nodes of identical devices joined by an intra-node and an inter-node network.

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
  StragglerSpec stragglers;  //!< optional "stragglers": slow ranks/nodes and per-step jitter
  FailureSpec failures;      //!< optional "failures": MTBF and checkpoint costs

  int64_t total_gpus() const { return nodes * gpus_per_node; }
};

Result<ClusterSpec> ClusterFromJson(const Json& j, const std::string& file, const std::string& path = "");
Json ClusterToJson(const ClusterSpec& c);
Result<ClusterSpec> LoadClusterFile(const std::string& path);

}  // namespace parallax
