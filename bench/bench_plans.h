#pragma once
// The plan the planner and simulator benchmarks share: GPT-3 175B on 128 DGX A100 nodes
// (dp 16, tp 8, pp 8, interleaved v2, 96 micro-batches).

#include "model/plan.h"
#include "model/presets.h"

namespace parallax::bench {

inline Plan Gpt3On1024Gpus() {
  Plan p;
  p.model = *ModelPreset("gpt3-175b");
  p.cluster = *ClusterPreset("dgx-a100");
  p.cluster.nodes = 128;
  p.layout = *ParseInlineLayout(
      "dp=16,tp=8,pp=8,zero=1,micro_batch=1,global_batch=1536,recompute=full,schedule=interleaved,virtual_stages=2");
  p.training.global_batch = 1536;
  return p;
}

}  // namespace parallax::bench
