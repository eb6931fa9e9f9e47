#pragma once
// Resolving command-line arguments: a preset name or a JSON file path.

#include <cstdint>
#include <string>

#include "model/cluster_spec.h"
#include "model/cost_db.h"
#include "model/model_spec.h"
#include "model/plan.h"

namespace parallax {

//! A model preset name, our model JSON or a Hugging Face config.json.
Result<ModelSpec> ResolveModel(const std::string& name_or_path);
//! A cluster preset name or cluster JSON; `nodes` > 0 overrides the node count.
Result<ClusterSpec> ResolveCluster(const std::string& name_or_path, int64_t nodes = 0);
//! Whether `file_or_inline` is an inline layout ("dp=2,tp=2,...") rather than a plan file.
bool IsInlinePlan(const std::string& file_or_inline);
//! A plan JSON file, or an inline layout ("dp=2,tp=2,...") combined with `model` and `cluster`.
Result<Plan> ResolvePlan(const std::string& file_or_inline, const ModelSpec* model,
                         const ClusterSpec* cluster, const TrainingSpec& training);

}  // namespace parallax
