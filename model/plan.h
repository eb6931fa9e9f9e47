#pragma once
// Layout (how the job is split) and Plan (a self-contained, runnable description).

#include <cstdint>
#include <optional>
#include <string>

#include "model/cluster_spec.h"
#include "model/implementation.h"
#include "model/json_io.h"
#include "model/model_spec.h"
#include "model/schedule.h"
#include "model/sync_mode.h"
#include "model/training_spec.h"

namespace parallax {

//! Korthikanti et al. 2022: none keeps every activation; selective recomputes the attention
//! core (softmax, dropout, QK^T, AV); full keeps only each layer's input and reruns the layer.
enum class Recompute { kNone, kSelective, kFull };

struct Layout {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t zero_stage = 0;      //!< 0..3
  int64_t micro_batch = 1;     //!< sequences per micro-batch per DP replica
  int64_t global_batch = 0;    //!< sequences per step; 0 = from the TrainingSpec
  Recompute recompute = Recompute::kNone;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int64_t virtual_stages = 1;  //!< model chunks per pipeline rank (interleaved only)
  bool sequence_parallel = false;
  SyncMode sync;  //!< classic modes (model/sync_mode.h); the default is the all-reduce family

  int64_t world_size() const { return dp * tp * pp; }
  //! Ranks of the job: the workers plus dedicated parameter servers (after the workers).
  int64_t job_ranks() const { return world_size() + sync.dedicated_servers(); }
  //! Micro-batches per step per pipeline (gradient-accumulation steps).
  int64_t num_microbatches() const { return global_batch / (dp * micro_batch); }
};

struct Plan {
  ModelSpec model;
  TrainingSpec training;
  ClusterSpec cluster;
  Layout layout;
  //! What runs the plan (model/implementation.h); JSON: a preset name or a full profile object.
  ImplementationProfile implementation = DefaultImplementation();
  std::optional<Json> prediction;  //!< what the planner predicted; carried, not interpreted
};

//! Megatron rank order (DESIGN.md "Ranks and groups"): tensor parallel varies fastest, then data
//! parallel, then pipeline. The one definition the planner's placement and the executor's groups use.
inline int64_t GlobalRank(const Layout& l, int64_t tp_idx, int64_t dp_idx, int64_t pp_idx) {
  return tp_idx + l.tp * (dp_idx + l.dp * pp_idx);
}

//! Whether the layout's tensor-parallel groups span nodes (tp a multiple of gpus_per_node above it).
inline bool TpSpansNodes(const Layout& l, const ClusterSpec& c) { return l.tp > c.gpus_per_node; }

const char* ToString(Recompute r);
Result<Recompute> RecomputeFromString(const std::string& s);

//! Parses "dp=2,tp=4,pp=1,zero=1,micro_batch=2,global_batch=64,recompute=full,
//! schedule=1f1b,virtual_stages=1,sequence_parallel=1"; omitted keys keep Layout's defaults.
Result<Layout> ParseInlineLayout(const std::string& text);
Result<Layout> LayoutFromJson(const Json& j, const std::string& file, const std::string& path);
Json LayoutToJson(const Layout& l);
std::string LayoutToString(const Layout& l);  //!< the inline form, round-trips through ParseInlineLayout

//! Checks a layout against model and cluster; the message names the broken rule
//! ("tp=3 does not divide heads=32"). `world_size` 0 means the cluster's GPU count.
Status ValidateLayout(const Layout& l, const ModelSpec& m, const ClusterSpec& c,
                      int64_t world_size = 0);

Result<Plan> PlanFromJson(const Json& j, const std::string& file);
Json PlanToJson(const Plan& p);
Result<Plan> LoadPlanFile(const std::string& path);
Status SavePlanFile(const std::string& path, const Plan& p);

}  // namespace parallax
