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
#include "model/training_spec.h"

namespace parallax {

//! Korthikanti et al. 2022: none keeps every activation; selective recomputes the attention
//! core (softmax, dropout, QK^T, AV); full keeps only each layer's input and reruns the layer.
enum class Recompute { kNone, kSelective, kFull };

//! How the planner prices the router's balance (DESIGN.md "Mixture of experts"); pricing only: `run`
//! routes with the learned top-k router, dropless unless a capacity is given.
enum class RoutingKind {
  kBalanced,  //!< tokens spread evenly over the experts (NVIDIA's published MoE benchmarks force it)
  kDropless,  //!< the busiest expert holds `factor` times the mean load; every token kept
  kCapacity,  //!< each expert takes at most `factor` times the mean load; the rest are dropped
};
struct Routing {
  RoutingKind kind = RoutingKind::kBalanced;
  double factor = 1.0;
  bool operator==(const Routing&) const = default;
  //! Tokens the busiest expert processes over the balanced mean: what a grouped GEMM and the
  //! all-to-all wait for.
  double LoadFactor() const { return kind == RoutingKind::kBalanced ? 1.0 : factor; }
};

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
  // Expert parallelism (Megatron-Core parallel folding): each stage's tp x dp ranks regrouped as
  // etp x ep x edp for the expert layers; does not change the world size.
  int64_t ep = 1;   //!< routed experts split over ep ranks
  int64_t etp = 0;  //!< expert tensor parallel; 0 = tp (Megatron-Core's default)
  Routing routing;

  int64_t world_size() const { return dp * tp * pp; }
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  //! Expert data parallel: the ranks an expert's gradient is summed over.
  int64_t expert_dp() const { return tp * dp / (ep * expert_tp()); }
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

//! A rank's place in the expert groups of its pipeline stage: its index within the stage (tp fastest,
//! then dp) split as etp fastest, then ep, then edp (Megatron-Core's expert rank generator).
struct ExpertCoords {
  int64_t etp_idx = 0, ep_idx = 0, edp_idx = 0;
};
inline ExpertCoords ExpertCoordsOf(const Layout& l, int64_t tp_idx, int64_t dp_idx) {
  const int64_t local = tp_idx + l.tp * dp_idx;
  const int64_t etp = l.expert_tp();
  return {local % etp, (local / etp) % l.ep, local / (etp * l.ep)};
}
//! The global rank of expert coordinates on pipeline rank `pp_idx` (the inverse of ExpertCoordsOf).
inline int64_t ExpertGlobalRank(const Layout& l, const ExpertCoords& e, int64_t pp_idx) {
  return e.etp_idx + l.expert_tp() * (e.ep_idx + l.ep * e.edp_idx) + l.tp * l.dp * pp_idx;
}

//! Whether the layout's tensor-parallel groups span nodes (tp a multiple of gpus_per_node above it).
inline bool TpSpansNodes(const Layout& l, const ClusterSpec& c) { return l.tp > c.gpus_per_node; }

const char* ToString(Recompute r);
//! "balanced", "dropless:F" or "capacity:F".
std::string ToString(const Routing& r);
Result<Routing> RoutingFromString(const std::string& s);
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

//! The expert-parallel part of ValidateLayout: ep and etp against the model and the stage's ranks.
Status ValidateExpertLayout(const Layout& l, const ModelSpec& m);

Result<Plan> PlanFromJson(const Json& j, const std::string& file);
Json PlanToJson(const Plan& p);
Result<Plan> LoadPlanFile(const std::string& path);
Status SavePlanFile(const std::string& path, const Plan& p);

}  // namespace parallax
