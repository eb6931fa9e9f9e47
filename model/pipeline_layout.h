#pragma once
// Megatron-Core's explicit pipeline layout (--pipeline-model-parallel-layout; megatron/core/
// transformer/pipeline_parallel_layer_layout.py PipelineParallelLayerLayout): one entry per model
// stage, in virtual order (stage i runs on pipeline rank i % pp as its chunk i / pp), separated by
// '|', each naming what the stage holds: E the input embedding, t a transformer (decoder) layer, m
// a multi-token-prediction module, L the loss. "x*n" repeats x n times and "(...)*n" a group;
// commas are cosmetic (Megatron drops them; the inline layout form cannot carry them). Example:
// NVIDIA's DeepSeek-V3 recipes run "Et*4|(t*4|)*14tmL" (61 layers over 16 stages, 4 in each but the
// last, which holds one layer, the MTP module and the loss).

#include <cstdint>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax {

struct PipelineLayoutStage {
  int64_t decoders = 0;
  int64_t mtp = 0;
  bool embedding = false;
  bool loss = false;
};

//! The stages of a layout string, its repetitions unrolled; bad input names the character or
//! the repetition that does not parse.
Result<std::vector<PipelineLayoutStage>> ParsePipelineLayout(const std::string& text);

//! Why `text` cannot be the layout of `layers` decoder layers over pp x vp model stages (empty when
//! it can): Megatron's rules (validate_layer_layout): pp x vp stages, every decoder layer once, the
//! embedding first and the loss last exactly once, the model's `mtp_layers` MTP modules after the
//! last decoder layer (their count unchecked when `mtp_layers` < 0).
std::string PipelineLayoutProblem(const std::string& text, int64_t layers, int64_t mtp_layers, int64_t pp, int64_t vp);

}  // namespace parallax
