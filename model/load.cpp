#include "model/load.h"

#include <filesystem>

#include "model/presets.h"

namespace parallax {
namespace {

std::string Known(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool LooksLikePath(const std::string& s) {
  return s.find('/') != std::string::npos || s.find(".json") != std::string::npos ||
         std::filesystem::exists(s);
}

}  // namespace

Result<ModelSpec> ResolveModel(const std::string& name_or_path) {
  if (auto m = ModelPreset(name_or_path)) return *m;
  if (LooksLikePath(name_or_path)) return LoadModelFile(name_or_path);
  return BadInput("unknown model \"" + name_or_path + "\": not a preset (" + Known(ModelPresetNames()) +
                  ") and not a file");
}

Result<ClusterSpec> ResolveCluster(const std::string& name_or_path, int64_t nodes) {
  Result<ClusterSpec> c = BadInput("");
  if (auto p = ClusterPreset(name_or_path)) {
    c = *p;
  } else if (LooksLikePath(name_or_path)) {
    c = LoadClusterFile(name_or_path);
  } else {
    return BadInput("unknown cluster \"" + name_or_path + "\": not a preset (" + Known(ClusterPresetNames()) +
                    ") and not a file");
  }
  if (c && nodes > 0) c->nodes = nodes;
  if (c && nodes < 0) return BadInput("--nodes must be > 0 (got " + std::to_string(nodes) + ")");
  return c;
}

bool IsInlinePlan(const std::string& file_or_inline) {
  return file_or_inline.find('=') != std::string::npos && !std::filesystem::exists(file_or_inline);
}

Result<Plan> ResolvePlan(const std::string& file_or_inline, const ModelSpec* model, const ClusterSpec* cluster,
                         const TrainingSpec& training) {
  if (!IsInlinePlan(file_or_inline)) {
    PX_ASSIGN(Plan p, LoadPlanFile(file_or_inline));
    if (model) p.model = *model;
    if (cluster) p.cluster = *cluster;
    if (training.global_batch > 0) p.layout.global_batch = p.training.global_batch = training.global_batch;
    return p;
  }
  if (!model) return BadInput("an inline plan needs --model");
  if (!cluster) return BadInput("an inline plan needs --cluster");
  PX_ASSIGN(const Layout l, ParseInlineLayout(file_or_inline));
  Plan p;
  p.model = *model;
  p.cluster = *cluster;
  p.training = training;
  p.layout = l;
  if (training.global_batch > 0) p.layout.global_batch = training.global_batch;
  p.training.global_batch = p.layout.global_batch;
  return p;
}

}  // namespace parallax
