// `parallax cluster show C [--nodes N]`: what the planner will assume about a cluster.
#include <cstdio>
#include <vector>

#include "cli/command.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "model/load.h"
#include "planner/cost/placement.h"

namespace parallax::cli {
namespace {

struct ClusterOptions {
  std::string cluster;
  int64_t nodes = 0;
  bool json = false;
};

//! What a group of `size` consecutive ranks (tp=size; an expert-parallel group of size ranks with
//! etp=1) gets on the cluster: inside one NVLink domain when it fits in one (a group that fits is
//! placed inside one), else the domains the first such group spans.
struct GroupReach {
  int64_t size = 0;
  bool fits = false;                  //!< the job has that many GPUs
  planner::PlacedGroup placed;        //!< the domains it spans, the fewest members in one
  double per_gpu_GBps = 0;            //!< one direction: NVLink inside a domain, its NIC share across
};

GroupReach Reach(const ClusterSpec& c, int64_t size) {
  GroupReach r;
  r.size = size;
  r.fits = size <= c.total_gpus();
  if (!r.fits) return r;
  r.placed = planner::PlaceRanks(c, 0, size, 1);
  r.per_gpu_GBps = r.placed.spans_nodes() ? c.inter_node.bandwidth_GBps / static_cast<double>(c.gpus_per_node)
                                          : c.intra_node.bandwidth_GBps;
  return r;
}

//! The group sizes `cluster show` explains: tp=8 and ep=64 (the NVL72 examples) and a whole domain.
std::vector<int64_t> ShownGroups(const ClusterSpec& c) {
  std::vector<int64_t> sizes{8, 64};
  if (c.domain_size() != 8 && c.domain_size() != 64) sizes.push_back(c.domain_size());
  return sizes;
}

int Show(const ClusterOptions& o) {
  auto c = ResolveCluster(o.cluster, o.nodes);
  if (!c) return ReportError(c.error(), o.json);
  const DeviceSpec& d = c->device;
  const int64_t domain = c->domain_size();
  const int64_t domains = (c->total_gpus() + domain - 1) / domain;
  const int64_t last = c->total_gpus() - (domains - 1) * domain;  // GPUs of the last domain
  if (o.json) {
    Json j = ClusterToJson(*c);
    j["total_gpus"] = c->total_gpus();
    j["aggregate_peak_bf16_pflops"] = static_cast<double>(c->total_gpus()) * d.peak_tflops.bf16 / 1e3;
    j["nvlink_domain_size"] = domain;
    j["nvlink_domains"] = domains;
    j["last_domain_gpus"] = last;
    Json groups = Json::array();
    for (int64_t size : ShownGroups(*c)) {
      const GroupReach r = Reach(*c, size);
      Json g{{"size", size}, {"fits", r.fits}};
      if (r.fits) {
        g["domains"] = r.placed.nodes;
        g["fewest_in_one_domain"] = r.placed.ranks_per_node;
        g["all_nvlink"] = !r.placed.spans_nodes();
        g["per_gpu_GBps"] = r.per_gpu_GBps;
      }
      groups.push_back(g);
    }
    j["groups"] = groups;
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
  std::printf("inter    %.1f GB/s per node per direction, %.1f us (%.1f GB/s per device)\n", c->inter_node.bandwidth_GBps,
              c->inter_node.latency_us, c->inter_node.bandwidth_GBps / static_cast<double>(c->gpus_per_node));
  if (c->cpus_per_node > 0) {
    std::printf("cpus     %lld a node for its %lld ranks%s\n", (long long)c->cpus_per_node, (long long)c->gpus_per_node,
                c->gpus_per_node > c->cpus_per_node
                    ? "; more ranks than CPUs: they take turns, compute priced at the pace of the CPU holding the most"
                    : "");
  }
  if (domain == c->gpus_per_node) {
    std::printf("nvlink   each node is its own NVLink domain (%lld devices); across nodes the NICs\n", (long long)domain);
  } else {
    std::printf("nvlink   domains of %lld devices (%lld nodes each) joined by NVLink switches: %lld domain%s",
                (long long)domain, (long long)((domain + c->gpus_per_node - 1) / c->gpus_per_node), (long long)domains,
                domains == 1 ? "" : "s");
    if (last != domain) std::printf(", the last one partial (%lld devices)", (long long)last);
    std::printf("; ranks fill a domain before the next; inside one the intra figures apply, across domains the NICs\n");
  }
  for (int64_t size : ShownGroups(*c)) {
    const GroupReach r = Reach(*c, size);
    std::printf("group    %lld consecutive ranks (tp=%lld, or ep=%lld with etp=1): ", (long long)size, (long long)size,
                (long long)size);
    if (!r.fits) {
      std::printf("needs more devices than the %lld here\n", (long long)c->total_gpus());
    } else if (!r.placed.spans_nodes()) {
      std::printf("inside one NVLink domain, all NVLink at %.0f GB/s per device per direction\n", r.per_gpu_GBps);
    } else {
      std::printf("spans %lld NVLink domains (at least %lld ranks in each): NVLink inside, the NICs across at %.1f GB/s "
                  "per device per direction\n",
                  (long long)r.placed.nodes, (long long)r.placed.ranks_per_node, r.per_gpu_GBps);
    }
  }
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
