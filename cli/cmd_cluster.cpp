// `parallax cluster show C [--nodes N]`: what the planner will assume about a cluster.
#include <cstdio>

#include "cli/command.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "model/load.h"

namespace parallax::cli {
namespace {

struct ClusterOptions {
  std::string cluster;
  int64_t nodes = 0;
  bool json = false;
};

int Show(const ClusterOptions& o) {
  auto c = ResolveCluster(o.cluster, o.nodes);
  if (!c) return ReportError(c.error(), o.json);
  const DeviceSpec& d = c->device;
  if (o.json) {
    Json j = ClusterToJson(*c);
    j["total_gpus"] = c->total_gpus();
    j["aggregate_peak_bf16_pflops"] = static_cast<double>(c->total_gpus()) * d.peak_tflops.bf16 / 1e3;
    PrintJson(j);
    return 0;
  }
  std::printf("cluster %s: %lld nodes x %lld = %lld devices of %s\n", c->name.c_str(), (long long)c->nodes,
              (long long)c->gpus_per_node, (long long)c->total_gpus(), d.name.c_str());
  std::printf("device   peak TFLOP/s fp32 %.1f, tf32 %.1f, bf16 %.1f, fp16 %.1f, fp8 %.1f; %.1f GiB at %.0f GB/s\n",
              d.peak_tflops.fp32, d.peak_tflops.tf32, d.peak_tflops.bf16, d.peak_tflops.fp16, d.peak_tflops.fp8,
              d.memory_GiB, d.hbm_GBps);
  std::printf("intra    %.1f GB/s per device per direction, %.1f us\n", c->intra_node.bandwidth_GBps,
              c->intra_node.latency_us);
  std::printf("inter    %.1f GB/s per node per direction, %.1f us\n", c->inter_node.bandwidth_GBps,
              c->inter_node.latency_us);
  return 0;
}

}  // namespace

void RegisterClusterCommand(CLI::App& root, CliState& state) {
  auto* cluster = root.add_subcommand("cluster", "Describe a cluster preset or file");
  cluster->require_subcommand(1);
  SetExample(cluster, "parallax cluster show dgx-h100 --nodes 4");
  auto opts = std::make_shared<ClusterOptions>();
  auto* show = cluster->add_subcommand("show", "Devices, peaks and links of a cluster");
  SetExample(show, "parallax cluster show dgx-h100 --nodes 4");
  show->add_option("cluster", opts->cluster, "Preset name or cluster JSON")->required();
  show->add_option("--nodes", opts->nodes, "Scale a preset to N nodes")->check(AtLeast(1));
  show->add_flag("--json", opts->json, "Print one JSON object");
  show->callback([opts, &state] { state.exit_code = Show(*opts); });
}

}  // namespace parallax::cli
