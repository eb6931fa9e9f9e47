#pragma once
// Everything both evaluators need about one plan, costed once: per pipeline rank and chunk the
// forward/backward time of one micro-batch, the pipeline send/recv time, the DP gradient and
// parameter collectives by ZeRO stage, and the optimizer step.
// CostPlan runs named phases, one file per concern (plan_cost_phases.h): pipeline_hops.cpp,
// rank_ops.cpp, dp_costs.cpp. Which parameter groups exist, where they are used, gathered and
// reduced is model/param_groups.h's; this file only prices them.

#include <cstdint>
#include <list>
#include <utility>
#include <vector>

#include "model/cost_db.h"
#include "model/param_groups.h"
#include "model/plan.h"
#include "model/stage_split.h"
#include "planner/cost/collective.h"
#include "planner/cost/compute.h"
#include "planner/cost/layer_ops.h"

namespace parallax::planner {

//! Cost models for one cluster and precision plus a cache of unit costs (not thread-safe: one
//! context per thread).
class CostContext {
 public:
  //! `impl` null: the default profile (our executor).
  CostContext(const ClusterSpec& cluster, Precision precision, const CostDb* db = nullptr,
              const ImplementationProfile* impl = nullptr);

  //! Unit costs for `model` under `layout`'s tp / micro-batch / SP / recompute (cached). Also sets
  //! the compute models' time share for the layout's busy ranks per node (UseLayout).
  const UnitCosts& Units(const ModelSpec& model, const Layout& layout, int64_t seq_len);

  //! Prices compute for `layout` on this cluster: on CPU nodes whose ranks outnumber their CPUs,
  //! every compute time is ClusterSpec::SlowestCoreShare of the layout's busy ranks per node longer.
  void UseLayout(const Layout& layout);
  const ComputeModel& compute() const { return compute_; }
  const CollectiveModel& collectives() const { return collectives_; }
  const ClusterSpec& cluster() const { return cluster_; }
  Precision precision() const { return precision_; }
  const ImplementationProfile& implementation() const { return impl_; }

 private:
  ClusterSpec cluster_;
  Precision precision_;
  ImplementationProfile impl_;
  ComputeModel compute_;
  ComputeModel fp8_;  //!< the linear layers' FP8 GEMMs (used only under Precision::kFp8)
  CollectiveModel collectives_;
  ModelSpec cached_model_;  //!< the model `cache_` holds unit costs of (all of it: the op catalogue reads every field)
  std::vector<std::pair<UnitKey, UnitCosts>> cache_;
};

struct ChunkCost {
  int64_t stage = 0;        //!< model stage (chunk * pp + pp_rank)
  LayerRange layers;
  //! Multi-token-prediction modules after its layers (StageMtpModules): each runs as one more layer
  //! (UnitCosts::Layer(layers + k)), with a layer's gradient bucket and accumulation pass.
  int64_t mtp = 0;
  //! The layer passes a micro-batch makes through the chunk: its decoder layers and MTP modules.
  int64_t units() const { return layers.count + mtp; }
  //! The layer index of its i-th unit in forward order: decoder layers, then MTP module k at
  //! `model_layers` + k (stages holding MTP modules end the decoder, or hold no layer).
  int64_t UnitLayer(int64_t i, int64_t model_layers) const {
    return i < layers.count ? layers.first + i : model_layers + (i - layers.count);
  }
  bool embedding = false;   //!< holds the embedding (stage 0)
  bool head = false;        //!< holds the final norm, LM head and loss (last stage)
  double fwd_s = 0, bwd_s = 0;        //!< one micro-batch, incl. TP collectives (and recompute in bwd)
  double fwd_tp_s = 0, bwd_tp_s = 0;  //!< TP-collective part
};

//! The memory passes our executor's per-group ZeRO bookkeeping runs on the compute stream, around
//! one group's collectives, each a recorded op: ZeRO-3 copies the rank's parameter shard into the
//! gathered buffer before every all-gather (shard_copy: 2 x shard x parameter bytes), ZeRO-2/3 zero
//! the group's transient fp32 gradient before the first backward pass adding to it (grad_zero: 4 B
//! per parameter; ParamGroupDef::grad_first_pass) and add each reduce-scattered shard into the
//! accumulator before the next reduce-scatter is issued (grad_fold: 12 B per shard element).
//! Seconds, and the bytes the predicted op carries (refine samples it at them).
struct ZeroPasses {
  double copy_s = 0, copy_bytes = 0;
  double zero_s = 0, zero_bytes = 0;
  double fold_s = 0, fold_bytes = 0;
};

//! DP collectives of one rank (seconds), by ZeRO stage:
//!  0: all-reduce of each layer's gradients after the last micro-batch's backward of that layer;
//!  1: reduce-scatter of the same buckets, all-gather of the updated parameters after the step;
//!  2: reduce-scatter after every micro-batch's backward of a layer, all-gather after the step;
//!  3: all-gather of a layer's parameters before every forward / recompute / backward pass
//!     (prefetched one layer ahead), reduce-scatter of its gradients after every backward.
//! DeepSpeed's ZeRO-3 prefetch runs at each module fetch: a layer's four weight-holding linears
//! (qkv, attention output, fc1, fc2) each prefetch up to zero3_prefetch_params of what follows.
inline constexpr double kZero3PrefetchesPerLayer = 4;

struct DpCost {
  //! A parameter group outside the transformer layers (model/param_groups.h). With per-group
  //! buckets each has its own gradient collective and, under ZeRO-3, its own gather before the pass
  //! that uses it; size-based buckets merge a rank's outer groups into one.
  struct OuterGroup {
    //! Its definition; for size-based buckets the rank's outer groups merged (the first one's
    //! place, the parameters and uses of all).
    ParamGroupDef group;
    bool embedding = false;  //!< group.uses_embedding: read by the embedding pass (first stage)
    bool head = false;       //!< group.uses_head: read by the head pass (last stage)
    double grad_s = 0;
    double grad_bytes = 0, param_bytes = 0;  //!< message sizes (gradient collective; gathers)
    double gather_s = 0;        //!< ZeRO-3: gathered before each pass that uses it
    double gather_after_s = 0;  //!< ZeRO-1/2, per-group buckets: gathered after the step
    ZeroPasses passes;          //!< per-group buckets: its memory passes (ZeroPasses)

    //! Whether chunk `cc` reduces this group after its backward: the chunk holding it.
    bool ReducedBy(const ChunkCost& cc) const { return group.stage == cc.stage; }
    //! Whether chunk `cc`'s embedding pass (`embedding_pass`) or head pass uses (gathers) this group.
    bool UsedBy(const ChunkCost& cc, bool embedding_pass) const {
      return group.stage == cc.stage && group.Uses(embedding_pass ? ChunkPass::kEmbedding : ChunkPass::kHead);
    }
    //! ZeRO-1/2, the parameter gather of a step runs in group order: chunk `cc` gathers this group
    //! before its layers (first read by the embedding pass) or after them (first read by the head's).
    bool GatheredBeforeLayers(const ChunkCost& cc) const {
      return group.stage == cc.stage && group.first_use == ChunkPass::kEmbedding;
    }
    bool GatheredAfterLayers(const ChunkCost& cc) const {
      return group.stage == cc.stage && group.first_use == ChunkPass::kHead;
    }
  };
  double grad_layer_s = 0;    //!< gradient collective of one layer's gradients
  double grad_layer_bytes = 0, param_layer_bytes = 0;  //!< its message; a layer gather's
  double grad_outer_s = 0;    //!< of the embedding / head gradients (first / last stage), all groups
  double gather_layer_s = 0;  //!< ZeRO-3: all-gather of one layer's parameters (its prefetched part)
  //! ZeRO-3 under a prefetch budget (zero3_prefetch_params) smaller than a layer: the part of each
  //! layer gathered when the layer is reached, the compute waiting for it; 0 when prefetched whole.
  double gather_demand_layer_s = 0;
  double gather_ahead_bytes = 0, gather_demand_bytes = 0;  //!< the two gathers' messages
  double gather_after_s = 0;  //!< ZeRO-1/2: all-gather of the rank's parameters after the step, all groups
  double tied_embedding_s = 0;  //!< all-reduce of the tied embedding gradient, first <-> last stage
  //! Buckets are parameter groups (profile dp_bucket_MiB 0, our executor): one collective per
  //! group in `outer`, ZeRO-1/2 gathers per group after the step, and at most
  //! kReduceScattersInFlight ZeRO-2/3 reduce-scatters in flight (model/param_groups.h).
  bool per_group = false;
  std::vector<OuterGroup> outer;  //!< the rank's outer groups, in group order (model/param_groups.h)
  double gather_after_layer_s = 0;  //!< per_group, ZeRO-1/2: one layer group's gather after the step
  //! ZeRO-1/2 with the profile's overlap_param_gather: the after-step gather runs instead under
  //! the next step's first forward of each chunk, which waits for its parameters (GatherReady).
  bool gather_overlapped = false;
  ZeroPasses layer_passes;          //!< per_group: one layer group's memory passes
  //! Compute-stream time of one layer's passes in a forward (the shard copy) and a backward pass
  //! (shard copy, gradient zero-fill, the fold of its reduce-scatter).
  double layer_fwd_pass_s() const { return layer_passes.copy_s; }
  double layer_bwd_pass_s() const { return layer_passes.copy_s + layer_passes.zero_s + layer_passes.fold_s; }
};

struct RankCost {
  std::vector<ParamGroupDef> groups;  //!< the rank's parameter groups (model/param_groups.h RankParamGroups)
  //! One of the rank's layers for the closed form's per-layer terms: UnitCosts::layer when every
  //! layer is alike, else the mean over the rank's layers (dense and MoE, local and global attention).
  struct LayerTimes {
    double fwd_s = 0, bwd_s = 0, fwd_tp_s = 0, bwd_tp_s = 0;
  } layer;
  std::vector<ChunkCost> chunks;
  //! The layer passes a micro-batch makes through all of the rank's chunks (ChunkCost::units).
  int64_t units() const;
  //! All of the rank's gradient collectives back to back: a layer group's per layer pass, and the
  //! outer groups' when the rank holds the embedding or the head. What a profile that reduces only
  //! after the whole backward (PlanCosts::dp_after_backward) runs once the backward is over.
  double GradReductionAfterBackward() const;
  double fwd_s = 0, bwd_s = 0;  //!< one micro-batch through all chunks of the rank
  double fwd_tp_s = 0, bwd_tp_s = 0;
  DpCost dp;
  //! The step's zero-fill of the gradient accumulators before the first pass (full buffers under
  //! ZeRO 0/1, shards under 2/3; 4 B per element), and the bytes its op carries.
  double grad_zero_step_s = 0, grad_zero_step_bytes = 0;
  //! The profile's per-micro-batch gradient accumulation pass (grad_accumulation other than
  //! in_gemm; 0 without): after each layer's backward, after the embedding pass's backward (the
  //! groups it finishes) and after the head's, every micro-batch or every one but the first.
  //! Included in the chunks' bwd_s (times (M-1)/M for after_first).
  double accum_layer_s = 0, accum_layer_bytes = 0;
  double accum_embedding_s = 0, accum_embedding_bytes = 0;
  double accum_head_s = 0, accum_head_bytes = 0;
  //! ZeRO-2/3 per-group buckets: the fold of the last reduce-scatter, after the pipeline drains.
  double final_fold_s = 0;
  double optimizer_s = 0;  //!< AdamW over this rank's shard (the executor's optimizer op)
  //! The grad-norm's read of this rank's gradient shard: the executor's grad_clip op computes it,
  //! then joins the global all-reduce (PlanCosts::clip_sync_s).
  double grad_norm_s = 0;
  int64_t params = 0;      //!< per TP rank, before ZeRO sharding
  //! Sequence parallelism, the whole-held parameters' gradient all-reduces (UnitOps::grad_sync):
  //! per parameter at each group's last backward under ZeRO 0/1, the rank's total here (under
  //! ZeRO-2/3 every micro-batch: in the chunks' bwd_s instead, this 0); or, coalesced, the one
  //! all-reduce of all of them after the backward.
  double sp_grad_last_s = 0;
  double sp_grad_coalesced_s = 0, sp_grad_coalesced_bytes = 0;
};

//! ZeRO-1/2 with overlap_param_gather (Megatron-Core --overlap-param-gather): when each unit of a
//! chunk has its parameters, counted from the start of the step, whose first forward of that
//! chunk waits for them. The gathers run back to back on the DP stream in forward order (chunk by
//! chunk: the embedding's groups, the layers, the head's), as Megatron-Core's forward pre-hooks
//! wait for a bucket group's all-gather and dispatch the next one. Size-based buckets take the
//! rank's one gather time in proportion to bytes.
struct ChunkGatherReady {
  double embedding = 0;  //!< the embedding's groups gathered (the chunk's start when it has none)
  double layers = 0;     //!< the chunk's layers start arriving (= embedding)
  double per_layer = 0;  //!< layer i gathered at layers + (i + 1) per_layer
  double head = 0;       //!< the head's groups gathered
};
std::vector<ChunkGatherReady> GatherReady(const RankCost& rc);

struct PlanCosts {
  std::vector<RankCost> ranks;  //!< index = pp_rank
  const UnitCosts* units = nullptr;
  //! One activation (or gradient) transfer over each model-stage boundary: index s is stage s ->
  //! s+1, between pipeline ranks s % pp and (s+1) % pp (pp * virtual_stages - 1 entries; the
  //! interleaved wrap from rank pp-1 to rank 0 included). Empty when pp == 1.
  std::vector<double> boundary_p2p_s;
  double p2p_s = 0;       //!< the slowest boundary's transfer (0 when pp == 1)
  double grad_norm_s = 0; //!< the slowest rank's grad-norm read: the all-reduce below starts after it
  double clip_sync_s = 0; //!< the global grad-norm all-reduce (a step-wide barrier), noise included
  double clip_sync_noise_s = 0;  //!< its part waiting for the latest TP group (NoiseModel)
  int64_t microbatches = 1;
  double contention = 1.0;  //!< compute slowdown while DP collectives overlap it
  bool dp_overlapped = false;  //!< some DP collectives overlap compute (dp > 1)
  //! The profile reduces gradients only after the whole backward (Megatron-LM 2021): ZeRO 0/1
  //! gradient collectives start when the pipeline has drained, not per layer.
  bool dp_after_backward = false;
  //! Pipeline sends block the sender until they complete (the profile's p2p semantics).
  bool blocking_p2p = false;
};

//! Costs `plan` (which must pass ValidateLayout). `ctx` must be built for the plan's cluster and precision.
PlanCosts CostPlan(CostContext& ctx, const Plan& plan);

//! DType that the compute runs in for a training precision.
DType ComputeDType(Precision p);
//! The peak MFU is measured against: the compute dtype's, fp8's own for fp8 (NVIDIA's
//! dgxc-benchmarking reports FP8 runs' MFU against the FP8 peak: its Llama 3.1 8B FP8 rows on H100
//! give 41% MFU at a rate that is 82% of the bf16 peak).
DType MfuDType(Precision p);

//! Bytes per optimizer-shard parameter of the profile's mixed_precision_passes (0 without them or in
//! fp32): the gradient cast from a 16-bit buffer (its 2 B read + 4 written), the fp16 unscale (4 + 4)
//! and the master-weight copy (4 + 2).
double MixedPrecisionPassBytes(const ImplementationProfile& impl, Precision precision, int64_t zero_stage);

//! Bytes the optimizer op moves per parameter of the rank's optimizer shard: AdamW (28 = 4 + 2 x 12
//! with the profile's optimizer_state_bytes in place of the 12 and a 2 B gradient where
//! optimizer_reads_grad_buffer; a per-tensor implementation re-reads each moment, twice that) plus
//! the profile's mixed-precision wrapper passes.
double OptimizerBytesPerParam(const ImplementationProfile& impl, Precision precision, int64_t zero_stage);

}  // namespace parallax::planner
