#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "model/op_catalogue.h"

namespace parallax::cli {

int ReportError(const Error& e, bool json, const Json& details) {
  std::fprintf(stderr, "parallax: %s\n", e.message.c_str());
  const int rc = ExitCodeFor(e);
  if (json) {
    Json j = details;
    j["error"] = e.message;
    j["exit_status"] = rc;
    PrintJson(j);
  }
  return rc;
}

Status CheckBackendDevice(const std::string& backend, const ClusterSpec& cluster) {
  if (backend != "cuda" || cluster.device.arch.sm_count > 0) return {};
  return BadInput("--backend cuda with the cluster \"" + cluster.name + "\", whose device \"" + cluster.device.name +
                  "\" is not a GPU: name this GPU's cluster with --cluster (a preset such as dgx-h100 or dgx-h200, "
                  "or the file calibrate --cluster-out wrote)");
}

void SetExample(CLI::App* cmd, const std::string& command_line) { cmd->footer("\nExample: " + command_line); }

void PrintJson(const Json& j) { std::cout << j.dump(2) << std::endl; }

void WarnIfOtherCatalogue(const CostDb& db, const std::string& path) {
  if (auto why = CatalogueMismatch(db)) std::fprintf(stderr, "parallax: warning: %s: %s\n", path.c_str(), why->c_str());
}

}  // namespace parallax::cli
