#pragma once
// How transformer layers are split over model stages (pp * virtual_stages of them). One
// definition for the planner and the executor, so predicted and executed stages hold the same
// layers (StageSplitOf says which rule applies, StageLayers what each stage holds):
//  - even: the stage count divides the layers;
//  - embedding and loss as layers: Megatron-Core's account_for_embedding_in_pipeline_split and
//    account_for_loss_in_pipeline_split (megatron/core/transformer/transformer_block.py
//    get_num_layers_to_build): the input embedding and the loss each count as one layer, so when
//    the stages divide layers + 2 the first stage holds one layer fewer than the others, and so
//    does the last (none when each stage has one slot: NVIDIA's 30-layer 405B proxy at pp 4, vp 8
//    runs the embedding and the loss as stages of their own);
//  - later stages one more (no interleaving only): the last `layers % stages` stages take one
//    layer more (stage 0 already holds the embedding and, under 1F1B, the most in-flight
//    micro-batches: it is the memory-critical stage).
// An interleaved schedule whose layers split neither evenly nor with the embedding and the loss
// counted is rejected (ValidateLayout, with StageSplitProblem's message).

#include <cstdint>
#include <string>

#include "model/plan.h"

namespace parallax {

struct LayerRange {
  int64_t first = 0;  //!< global index of the first layer of the stage
  int64_t count = 0;
  int64_t end() const { return first + count; }
};

enum class StageSplit { kEven, kEmbeddingAndLossAsLayers, kLaterStagesTakeOneMore };

//! The rule that splits `layers` over `stages` model stages (see above).
inline StageSplit StageSplitOf(int64_t layers, int64_t stages) {
  if (layers % stages == 0) return StageSplit::kEven;
  if (stages > 1 && (layers + 2) % stages == 0) {
    return StageSplit::kEmbeddingAndLossAsLayers;
  }
  return StageSplit::kLaterStagesTakeOneMore;
}

//! Layers held by model stage `stage` (0 .. stages-1) when `layers` are split over `stages`.
inline LayerRange StageLayers(int64_t layers, int64_t stages, int64_t stage) {
  LayerRange r;
  if (StageSplitOf(layers, stages) == StageSplit::kEmbeddingAndLossAsLayers) {
    const int64_t slots = (layers + 2) / stages;  // layers per stage, the embedding and the loss counted
    r.count = slots - (stage == 0 ? 1 : 0) - (stage == stages - 1 ? 1 : 0);
    r.first = stage == 0 ? 0 : stage * slots - 1;
    return r;
  }
  const int64_t base = layers / stages;
  const int64_t first_big = stages - layers % stages;  // stages from here on take base + 1
  r.count = base + (stage >= first_big ? 1 : 0);
  r.first = stage * base + (stage > first_big ? stage - first_big : 0);
  return r;
}

//! Model stage count of a layout: pp * virtual_stages.
inline int64_t ModelStages(const Layout& l) { return l.pp * l.virtual_stages; }

//! Why the layout's layers cannot be split over its model stages (empty when they can): an
//! interleaved schedule needs an even split or Megatron-Core's embedding-and-loss one.
inline std::string StageSplitProblem(const Layout& l, int64_t layers) {
  const int64_t stages = ModelStages(l);
  if (l.schedule != ScheduleKind::kInterleaved || StageSplitOf(layers, stages) != StageSplit::kLaterStagesTakeOneMore) {
    return "";
  }
  const auto s = [](int64_t v) { return std::to_string(v); };
  return "virtual_stages=" + s(l.virtual_stages) + " does not divide the layers per stage (" + s(layers) +
         " layers over pp=" + s(l.pp) + "), nor does pp*virtual_stages=" + s(stages) + " divide " + s(layers + 2) +
         " (the layers with the embedding and the loss counted as one each, Megatron-Core's "
         "account_for_embedding/loss_in_pipeline_split)";
}

}  // namespace parallax
