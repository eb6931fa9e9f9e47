#pragma once
// How transformer layers are split over model stages (pp * virtual_stages of them). One
// definition for the planner and the executor, so predicted and executed stages hold the same
// layers (StageSplitOf says which rule applies, StageLayers what each stage holds). The rules are
// Megatron-Core's (megatron/core/transformer/transformer_block.py get_num_layers_to_build, with or
// without virtual stages):
//  - even: the stage count divides the layers;
//  - embedding and loss as layers: account_for_embedding_in_pipeline_split and
//    account_for_loss_in_pipeline_split: the input embedding and the loss each count as one layer,
//    so when the stages divide layers + 2 the first stage holds one layer fewer than the others,
//    and so does the last (none when each stage has one slot: NVIDIA's 30-layer 405B proxy at
//    pp 4, vp 8 runs the embedding and the loss as stages of their own);
//  - pipeline layout: the layout lists every model stage's layers (Megatron-Core's
//    --pipeline-model-parallel-layout, model/pipeline_layout.h; NVIDIA's DeepSeek-V3 recipes);
//  - explicit: the layout names the first and/or last pipeline rank's layers (Megatron-Core's
//    num_layers_in_first_pipeline_stage / num_layers_in_last_pipeline_stage; NeMo's DeepSeek-V3
//    performance recipe runs 61 layers at pp 4 as 15, 16, 16, 14); the other ranks split the rest
//    evenly, and with virtual stages each rank's layers split evenly over its chunks, chunk c of
//    every rank following chunk c-1 of the last (transformer_layer.py get_transformer_layer_offset);
//  - neither: Megatron-Core asserts num_layers % pipeline_model_parallel_size == 0 (with the two
//    flags counted) and (layers per rank) % vp == 0, so such a layout is rejected (ValidateLayout,
//    with StageSplitProblem's message), whatever the schedule.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "model/pipeline_layout.h"
#include "model/plan.h"

namespace parallax {

struct LayerRange {
  int64_t first = 0;  //!< global index of the first layer of the stage
  int64_t count = 0;
  int64_t end() const { return first + count; }
};

enum class StageSplit { kEven, kEmbeddingAndLossAsLayers, kExplicit, kLayout, kNone };

//! The rule that splits `layers` over `stages` model stages (see above); kNone when neither does.
inline StageSplit StageSplitOf(int64_t layers, int64_t stages) {
  if (layers % stages == 0) return StageSplit::kEven;
  if (stages > 1 && (layers + 2) % stages == 0) {
    return StageSplit::kEmbeddingAndLossAsLayers;
  }
  return StageSplit::kNone;
}

//! Layers held by model stage `stage` (0 .. stages-1) when `layers` are split over `stages`. Under
//! kNone (a layout ValidateLayout rejects) the stages still partition the layers, the last
//! `layers % stages` taking one more, so that a caller pricing a rejected layout stays in range;
//! nothing runs that split.
inline LayerRange StageLayers(int64_t layers, int64_t stages, int64_t stage) {
  LayerRange r;
  if (StageSplitOf(layers, stages) == StageSplit::kEmbeddingAndLossAsLayers) {
    const int64_t slots = (layers + 2) / stages;  // layers per stage, the embedding and the loss counted
    r.count = slots - (stage == 0 ? 1 : 0) - (stage == stages - 1 ? 1 : 0);
    r.first = stage == 0 ? 0 : stage * slots - 1;
    return r;
  }
  const int64_t base = layers / stages;
  const int64_t first_big = stages - layers % stages;  // kNone only: stages from here on take base + 1
  r.count = base + (stage >= first_big ? 1 : 0);
  r.first = stage * base + (stage > first_big ? stage - first_big : 0);
  return r;
}

//! Model stage count of a layout: pp * virtual_stages.
inline int64_t ModelStages(const Layout& l) { return l.pp * l.virtual_stages; }

//! Whether the layout names its first or last pipeline rank's layers (the explicit split).
inline bool HasExplicitSplit(const Layout& l) { return l.first_stage_layers > 0 || l.last_stage_layers > 0; }

//! Layers pipeline rank `pp_rank` holds over all its chunks under the explicit split: the named
//! count on the first and last ranks, the rest shared evenly by the ranks between.
inline int64_t ExplicitRankLayers(const Layout& l, int64_t layers, int64_t pp_rank) {
  const bool first = l.first_stage_layers > 0, last = l.last_stage_layers > 0;
  if (pp_rank == 0 && first) return l.first_stage_layers;
  if (pp_rank == l.pp - 1 && last) return l.last_stage_layers;
  const int64_t middle_ranks = l.pp - (first ? 1 : 0) - (last ? 1 : 0);
  return middle_ranks > 0 ? (layers - l.first_stage_layers - l.last_stage_layers) / middle_ranks : 0;
}

//! The rule that splits the layout's layers: its pipeline layout, explicit when it names the first
//! or last rank's layers, else StageSplitOf.
inline StageSplit StageSplitOf(const Layout& l, int64_t layers) {
  if (!l.pipeline_layout.empty()) return StageSplit::kLayout;
  return HasExplicitSplit(l) ? StageSplit::kExplicit : StageSplitOf(layers, ModelStages(l));
}

//! Layers of model stage `stage` under the layout's pipeline_layout (stages in virtual order, as
//! Megatron lists them); an empty range when the text does not parse or names fewer stages (a
//! layout ValidateLayout rejects).
inline LayerRange PipelineLayoutLayers(const std::string& text, int64_t stage) {
  LayerRange r;
  const auto stages = ParsePipelineLayout(text);
  if (!stages) return r;
  for (int64_t i = 0; i < static_cast<int64_t>(stages->size()) && i <= stage; ++i) {
    const int64_t n = (*stages)[static_cast<size_t>(i)].decoders;
    if (i == stage) r.count = n;
    else r.first += n;
  }
  return r;
}

//! Layers held by model stage `stage` (ModelStage(pp, pp_rank, chunk)) of layout `l`. The one
//! definition the planner, the memory model and the executor read.
inline LayerRange StageLayers(const Layout& l, int64_t layers, int64_t stage) {
  if (!l.pipeline_layout.empty()) return PipelineLayoutLayers(l.pipeline_layout, stage);
  if (!HasExplicitSplit(l)) return StageLayers(layers, ModelStages(l), stage);
  const int64_t v = l.virtual_stages, rank = stage % l.pp, chunk = stage / l.pp;
  LayerRange r;
  r.count = ExplicitRankLayers(l, layers, rank) / v;
  r.first = chunk * (layers / v);
  for (int64_t p = 0; p < rank; ++p) r.first += ExplicitRankLayers(l, layers, p) / v;
  return r;
}

//! Multi-token-prediction modules (ModelSpec::mtp_layers) model stage `stage` holds: where the
//! layout's pipeline_layout places them ('m'), else all on the last stage, with the loss (Megatron-Core
//! megatron/core/transformer/multi_token_prediction.py mtp_on_this_rank: "If no custom layout is
//! provided, assumes all MTP layers (if any) are placed on the last pipeline stage"). The one
//! definition the parameter groups and the memory model read.
inline int64_t StageMtpModules(const Layout& l, int64_t mtp_layers, int64_t stage) {
  if (mtp_layers <= 0) return 0;
  if (!l.pipeline_layout.empty()) {
    const auto stages = ParsePipelineLayout(l.pipeline_layout);
    if (!stages || stage < 0 || stage >= static_cast<int64_t>(stages->size())) return 0;
    return (*stages)[static_cast<size_t>(stage)].mtp;
  }
  return stage == ModelStages(l) - 1 ? mtp_layers : 0;
}

//! The explicit split the planner's search tries where neither default rule splits `layers` over
//! `pp` ranks (no virtual stages): the middle ranks take ceil(layers / pp) each and the first and
//! last ranks share the shortfall, the last taking the larger part (it runs the loss too). This is
//! how NeMo's DeepSeek-V3 recipe splits 61 layers: 15 + 16 + 16 + 14 at pp 4, 3 + 4 x 14 + 2 at pp
//! 16. {first, last} layers, or nullopt when a rank would be left without a layer.
inline std::optional<std::pair<int64_t, int64_t>> SearchedExplicitSplit(int64_t layers, int64_t pp) {
  if (pp < 2 || layers < pp) return std::nullopt;
  const int64_t middle = (layers + pp - 1) / pp;
  const int64_t shortfall = middle * pp - layers;
  const int64_t first = middle - shortfall / 2, last = middle - (shortfall - shortfall / 2);
  if (first < 1 || last < 1) return std::nullopt;
  return std::make_pair(first, last);
}

//! Why the layout's layers cannot be split over its model stages (empty when they can): neither
//! evenly nor with the embedding and the loss counted as one layer each (Megatron-Core's rules).
inline std::string StageSplitProblem(const Layout& l, int64_t layers) {
  const auto s = [](int64_t v) { return std::to_string(v); };
  if (!l.pipeline_layout.empty()) {
    if (HasExplicitSplit(l)) return "pipeline_layout names every stage's layers: drop first_stage_layers / last_stage_layers";
    return PipelineLayoutProblem(l.pipeline_layout, layers, -1, l.pp, l.virtual_stages);
  }
  if (HasExplicitSplit(l)) {
    if (l.first_stage_layers < 0 || l.last_stage_layers < 0) return "first_stage_layers and last_stage_layers must be >= 1";
    if (l.pp < 2) return "first_stage_layers / last_stage_layers need pp >= 2 (they name a pipeline rank's layers)";
    const int64_t named = l.first_stage_layers + l.last_stage_layers;
    const int64_t middle_ranks = l.pp - (l.first_stage_layers > 0 ? 1 : 0) - (l.last_stage_layers > 0 ? 1 : 0);
    const std::string what = "first_stage_layers=" + s(l.first_stage_layers) + " and last_stage_layers=" +
                             s(l.last_stage_layers);
    if (named > layers || (middle_ranks == 0 && named != layers)) {
      return what + " leave " + s(layers - named) + " of layers=" + s(layers) + " for " + s(middle_ranks) +
             " middle pipeline ranks";
    }
    if (middle_ranks > 0 && (layers - named) % middle_ranks != 0) {
      return what + " leave " + s(layers - named) + " layers, which the " + s(middle_ranks) +
             " middle pipeline ranks do not share evenly";
    }
    for (int64_t p = 0; p < l.pp; ++p) {
      const int64_t n = ExplicitRankLayers(l, layers, p);
      if (n % l.virtual_stages != 0) {
        return "pipeline rank " + s(p) + "'s " + s(n) + " layers (" + what + ") do not split over virtual_stages=" +
               s(l.virtual_stages) + " chunks evenly";
      }
    }
    return "";
  }
  const int64_t stages = ModelStages(l);
  if (StageSplitOf(layers, stages) != StageSplit::kNone) return "";
  const std::string counted = " (the layers with the embedding and the loss counted as one each, Megatron-Core's "
                              "account_for_embedding/loss_in_pipeline_split)";
  if (l.virtual_stages == 1) {
    return "pp=" + s(l.pp) + " divides neither layers=" + s(layers) + " nor " + s(layers + 2) + counted;
  }
  return "virtual_stages=" + s(l.virtual_stages) + " does not divide the layers per stage (" + s(layers) +
         " layers over pp=" + s(l.pp) + "), nor does pp*virtual_stages=" + s(stages) + " divide " + s(layers + 2) +
         counted;
}

}  // namespace parallax
