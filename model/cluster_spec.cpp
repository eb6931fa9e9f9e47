#include "model/cluster_spec.h"

#include <cmath>

namespace parallax {
namespace {

constexpr int64_t kClusterVersion = 1;

LinkSpec ReadLink(ObjectReader r) {
  LinkSpec l;
  l.bandwidth_GBps = r.PositiveNumber("bandwidth_GBps");
  l.latency_us = r.NonNegativeNumber("latency_us");
  r.Finish();
  return l;
}

}  // namespace

Result<ClusterSpec> ClusterFromJson(const Json& j, const std::string& file, const std::string& path) {
  return CatchJsonErrors([&]() -> Result<ClusterSpec> {
    ObjectReader r(j, file, path);
    r.Header("cluster", kClusterVersion);
    ClusterSpec c;
    c.name = r.String("name");
    c.nodes = r.PositiveInt("nodes");
    c.gpus_per_node = r.PositiveInt("gpus_per_node");
    PX_ASSIGN(c.device, DeviceFromJson(r.Raw("device"), file, r.PathOf("device")));
    c.intra_node = ReadLink(r.Object("intra_node"));
    c.inter_node = ReadLink(r.Object("inter_node"));
    c.nvlink_domain = r.Has("nvlink_domain") ? r.PositiveInt("nvlink_domain") : 0;
    c.cpus_per_node = r.Has("cpus_per_node") ? r.PositiveInt("cpus_per_node") : 0;
    if (r.Has("stragglers")) c.stragglers = StragglersFromJson(r.Object("stragglers"));
    if (r.Has("failures")) c.failures = FailuresFromJson(r.Object("failures"));
    r.Finish();
    return c;
  });
}

Json ClusterToJson(const ClusterSpec& c) {
  auto link = [](const LinkSpec& l) {
    return Json{{"bandwidth_GBps", l.bandwidth_GBps}, {"latency_us", l.latency_us}};
  };
  Json j{{"kind", "cluster"},
         {"version", kClusterVersion},
         {"name", c.name},
         {"nodes", c.nodes},
         {"gpus_per_node", c.gpus_per_node},
         {"device", DeviceToJson(c.device)},
         {"intra_node", link(c.intra_node)},
         {"inter_node", link(c.inter_node)}};
  // Written only where it differs from the default, so files of node-sized domains stay as they were.
  if (c.domain_size() != c.gpus_per_node) j["nvlink_domain"] = c.nvlink_domain;
  if (c.cpus_per_node > 0) j["cpus_per_node"] = c.cpus_per_node;
  if (!c.stragglers.empty()) j["stragglers"] = StragglersToJson(c.stragglers);
  if (!c.failures.empty()) j["failures"] = FailuresToJson(c.failures);
  return j;
}

double ClusterSpec::SlowestCoreShare(int64_t busy) const {
  if (cpus_per_node <= 0 || busy <= cpus_per_node) return 1.0;
  return std::ceil(static_cast<double>(busy) / static_cast<double>(cpus_per_node));
}

Result<ClusterSpec> LoadClusterFile(const std::string& path) {
  PX_ASSIGN(const Json j, LoadJsonFile(path));
  return ClusterFromJson(j, path);
}

}  // namespace parallax
