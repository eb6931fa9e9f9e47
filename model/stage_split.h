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
//  - neither: Megatron-Core asserts num_layers % pipeline_model_parallel_size == 0 (with the two
//    flags counted) and (layers per rank) % vp == 0, so such a layout is rejected (ValidateLayout,
//    with StageSplitProblem's message), whatever the schedule.

#include <cstdint>
#include <string>

#include "model/plan.h"

namespace parallax {

struct LayerRange {
  int64_t first = 0;  //!< global index of the first layer of the stage
  int64_t count = 0;
  int64_t end() const { return first + count; }
};

enum class StageSplit { kEven, kEmbeddingAndLossAsLayers, kNone };

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

//! Why the layout's layers cannot be split over its model stages (empty when they can): neither
//! evenly nor with the embedding and the loss counted as one layer each (Megatron-Core's rules).
inline std::string StageSplitProblem(const Layout& l, int64_t layers) {
  const int64_t stages = ModelStages(l);
  if (StageSplitOf(layers, stages) != StageSplit::kNone) return "";
  const auto s = [](int64_t v) { return std::to_string(v); };
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
