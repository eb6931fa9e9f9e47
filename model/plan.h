#pragma once
// Layout (how the job is split) and Plan (a self-contained, runnable description).

#include <algorithm>
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

//! What selective recompute drops and reruns, as Megatron-Core's --recompute-modules (bit mask):
//! core_attn (its default: the attention core's probabilities or statistics), layernorm (the two
//! norms' outputs, recomputed from their inputs), moe_act (the routed experts' activation output,
//! recomputed from fc1's output), mla_up_proj (multi-latent attention's queries, keys and values,
//! recomputed from the latents by the up-projections and the rotary embedding:
//! multi_latent_attention.py recompute_up_proj) and mlp (a dense layer's whole MLP, rerun from its
//! input; MoE layers are left alone: transformer_layer.py sets recompute_mlp only when
//! not is_moe_layer).
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttn = 1,
  kRecomputeLayernorm = 2,
  kRecomputeMoeAct = 4,
  kRecomputeMlaUpProj = 8,
  kRecomputeMlp = 16,
};
inline constexpr uint32_t kRecomputeAllModules =
    kRecomputeCoreAttn | kRecomputeLayernorm | kRecomputeMoeAct | kRecomputeMlaUpProj | kRecomputeMlp;
//! "core_attn+layernorm+moe_act+mla_up_proj+mlp" (the set bits, in that order).
std::string RecomputeModulesToString(uint32_t modules);
//! Parses "+"- or space-separated module names; BadInput naming the unknown one.
Result<uint32_t> RecomputeModulesFromString(const std::string& s);

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
  //! Context parallel: each sequence split over cp ranks (Megatron-Core --context-parallel-size).
  int64_t cp = 1;
  int64_t zero_stage = 0;      //!< 0..3
  int64_t micro_batch = 1;     //!< sequences per micro-batch per DP replica
  int64_t global_batch = 0;    //!< sequences per step; 0 = from the TrainingSpec
  Recompute recompute = Recompute::kNone;
  //! Selective recompute's modules (RecomputeModule bits); 0 = core_attn, Megatron-Core's default.
  uint32_t recompute_modules = 0;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int64_t virtual_stages = 1;  //!< model chunks per pipeline rank (interleaved only)
  bool sequence_parallel = false;
  //! Layers of the first / last pipeline rank (Megatron-Core's num_layers_in_first_pipeline_stage /
  //! num_layers_in_last_pipeline_stage); 0 = the default split (model/stage_split.h).
  int64_t first_stage_layers = 0;
  int64_t last_stage_layers = 0;
  //! Megatron-Core's --pipeline-model-parallel-layout (model/pipeline_layout.h): what each model
  //! stage holds, e.g. "Et*4|(t*4|)*14tmL"; empty = the rules of model/stage_split.h.
  std::string pipeline_layout;
  // Expert parallelism (Megatron-Core parallel folding): each stage's tp x cp x dp ranks regrouped
  // as etp x ep x edp for the expert layers; does not change the world size.
  int64_t ep = 1;   //!< routed experts split over ep ranks
  int64_t etp = 0;  //!< expert tensor parallel; 0 = tp (Megatron-Core's default)
  Routing routing;
  SyncMode sync;  //!< classic modes (model/sync_mode.h); the default is the all-reduce family

  int64_t world_size() const { return dp * tp * cp * pp; }
  //! Ranks of the job: the workers plus dedicated parameter servers (after the workers).
  int64_t job_ranks() const { return world_size() + sync.dedicated_servers(); }
  //! Ranks of one node of `gpus_per_node` that compute at once: the workers there (dedicated
  //! servers, after the workers, wait while the workers compute and update only once pushed to).
  int64_t BusyRanksPerNode(int64_t gpus_per_node) const { return std::min(gpus_per_node, world_size()); }
  //! How much longer every compute time of this layout runs on `c`, its busy ranks per node sharing
  //! the node's CPUs (ClusterSpec::SlowestCoreShare; 1 on GPUs).
  double ComputeShareOn(const ClusterSpec& c) const { return c.SlowestCoreShare(BusyRanksPerNode(c.gpus_per_node)); }
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  //! Selective recompute's modules (recompute_modules, or core_attn when unset).
  uint32_t selective_modules() const { return recompute_modules != 0 ? recompute_modules : kRecomputeCoreAttn; }
  //! The modules each layer recomputes: none, every one (full: the whole layer reruns), or the
  //! selective set.
  uint32_t recomputed_modules() const {
    if (recompute == Recompute::kNone) return 0;
    if (recompute == Recompute::kFull) return kRecomputeAllModules;
    return selective_modules();
  }
  //! Expert data parallel: the ranks an expert's gradient is summed over.
  int64_t expert_dp() const { return tp * cp * dp / (ep * expert_tp()); }
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

//! Megatron-Core rank order (DESIGN.md "Ranks and groups"): tensor parallel varies fastest, then
//! context parallel, then data parallel, then pipeline. The one definition the planner's placement
//! and the executor's groups use (model/rank_groups.h derives the groups from it).
inline int64_t GlobalRank(const Layout& l, int64_t tp_idx, int64_t cp_idx, int64_t dp_idx, int64_t pp_idx) {
  return tp_idx + l.tp * (cp_idx + l.cp * (dp_idx + l.dp * pp_idx));
}

//! A rank's place in each dimension (the inverse of GlobalRank).
struct RankCoords {
  int64_t tp_idx = 0;
  int64_t cp_idx = 0;
  int64_t dp_idx = 0;
  int64_t pp_idx = 0;
  bool operator==(const RankCoords&) const = default;
};
inline RankCoords CoordsOf(const Layout& l, int64_t rank) {
  return {.tp_idx = rank % l.tp,
          .cp_idx = (rank / l.tp) % l.cp,
          .dp_idx = (rank / (l.tp * l.cp)) % l.dp,
          .pp_idx = rank / (l.tp * l.cp * l.dp)};
}
inline int64_t RankOf(const Layout& l, const RankCoords& c) {
  return GlobalRank(l, c.tp_idx, c.cp_idx, c.dp_idx, c.pp_idx);
}

//! Whether the layout's tensor-parallel groups span NVLink domains (tp a multiple of the domain above
//! it; the domain is the node unless the cluster says nvlink_domain), so their collectives cross NICs.
inline bool TpSpansNodes(const Layout& l, const ClusterSpec& c) { return l.tp > c.domain_size(); }
//! Whether tensor parallelism of `tp` tiles the cluster's NVLink domains: tp divides the domain, or
//! is a multiple of it (spanning whole domains). The one rule the layout check and the search share.
inline bool TpTilesDomains(int64_t tp, const ClusterSpec& c) {
  const int64_t d = c.domain_size();
  return tp <= d ? d % tp == 0 : tp % d == 0;
}
//! The domain rule's words: "gpus_per_node=8", or "nvlink_domain=72" where a domain is not a node.
std::string DomainInWords(const ClusterSpec& c);

//! Whether a plan may train in `p` on `d`: fp8 needs FP8 tensor cores on a GPU (peak_tflops.fp8 > 0:
//! Hopper, Ada, Blackwell; not Ampere). The CPU device passes: it is planned at its own rate, and
//! whether a backend runs fp8 is the backend's word (Backend::SupportsPrecision).
Status CheckPrecisionOnDevice(Precision p, const DeviceSpec& d);
//! Whether the implementation's FP8 recipe runs on `d` under `p`: mxfp8 needs block-scaled MMA
//! (Blackwell's tcgen05 with E8M0 scale factors, the hardware of its FP4 rate: a GPU whose
//! peak_tflops.fp4 is 0, Hopper or Ada, has none; Transformer Engine's MXFP8BlockScaling is for
//! Blackwell only). The CPU device passes, as for CheckPrecisionOnDevice.
Status CheckFp8RecipeOnDevice(Precision p, const ImplementationProfile& impl, const DeviceSpec& d);

//! A rank's place in the expert groups of its pipeline stage: its index within the stage (tp fastest,
//! then cp, then dp) split as etp fastest, then ep, then edp (Megatron-Core's expert rank generator).
struct ExpertCoords {
  int64_t etp_idx = 0, ep_idx = 0, edp_idx = 0;
};
inline ExpertCoords ExpertCoordsOf(const Layout& l, int64_t tp_idx, int64_t cp_idx, int64_t dp_idx) {
  const int64_t local = tp_idx + l.tp * (cp_idx + l.cp * dp_idx);
  const int64_t etp = l.expert_tp();
  return {local % etp, (local / etp) % l.ep, local / (etp * l.ep)};
}
//! The global rank of expert coordinates on pipeline rank `pp_idx` (the inverse of ExpertCoordsOf).
inline int64_t ExpertGlobalRank(const Layout& l, const ExpertCoords& e, int64_t pp_idx) {
  return e.etp_idx + l.expert_tp() * (e.ep_idx + l.ep * e.edp_idx) + l.tp * l.cp * l.dp * pp_idx;
}

const char* ToString(Recompute r);
//! "balanced", "dropless:F" or "capacity:F".
std::string ToString(const Routing& r);
Result<Routing> RoutingFromString(const std::string& s);
Result<Recompute> RecomputeFromString(const std::string& s);

//! Parses "dp=2,tp=4,pp=1,cp=2,zero=1,micro_batch=2,global_batch=64,recompute=full,
//! schedule=1f1b,virtual_stages=1,sequence_parallel=1"; omitted keys keep Layout's defaults.
Result<Layout> ParseInlineLayout(const std::string& text);
Result<Layout> LayoutFromJson(const Json& j, const std::string& file, const std::string& path);
Json LayoutToJson(const Layout& l);
//! The inline form, round-trips through ParseInlineLayout. LayoutToJson and LayoutToString write cp
//! only when it is not 1, so a layout without context parallelism reads as it did before cp existed.
std::string LayoutToString(const Layout& l);

//! Checks a layout against model and cluster; the message names the broken rule
//! ("tp=3 does not divide heads=32"). `world_size` 0 means the cluster's GPU count.
Status ValidateLayout(const Layout& l, const ModelSpec& m, const ClusterSpec& c,
                      int64_t world_size = 0);

//! The expert-parallel part of ValidateLayout: ep and etp against the model and the stage's ranks.
Status ValidateExpertLayout(const Layout& l, const ModelSpec& m);
//! Why `l`'s context parallelism cannot split sequences of `seq_len` tokens (empty when it can): the
//! causal load balance gives each cp rank two of 2*cp equal chunks.
std::string ContextParallelProblem(const Layout& l, int64_t seq_len);
//! Why `impl` cannot run `l`'s context parallelism on `m` (empty when it can): its cp_comm_type is
//! none or not modelled, or a2a (Ulysses) with heads not divisible by tp*cp. p2p and all_gather
//! split heads and kv heads over tp only, so they add no head rule.
std::string CpCommTypeProblem(const Layout& l, const ModelSpec& m, const ImplementationProfile& impl);

Result<Plan> PlanFromJson(const Json& j, const std::string& file);
Json PlanToJson(const Plan& p);
Result<Plan> LoadPlanFile(const std::string& path);
Status SavePlanFile(const std::string& path, const Plan& p);

}  // namespace parallax
