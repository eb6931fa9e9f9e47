#pragma once
// Shared by the executor tests: small plans and "train N steps, return the losses".

#include <string>
#include <vector>

#include "executor/backend_registry.h"
#include "executor/cpu/cpu_backend.h"
#include "executor/launch.h"
#include "executor/runtime/trainer.h"
#include "model/plan.h"
#include "model/presets.h"

namespace parallax::executor::testing {

//! gpt-tiny (or `model`) with an inline layout, fp32, a learning rate large enough that a wrong
//! gradient moves the loss curve visibly within 10 steps.
inline Plan TinyPlan(const std::string& layout, int64_t global_batch, const std::string& model = "gpt-tiny") {
  Plan p;
  p.model = *ModelPreset(model);
  p.cluster = *ClusterPreset("local-cpu");
  auto l = ParseInlineLayout(layout);
  if (!l) throw std::runtime_error(l.error().message);
  p.layout = *l;
  p.layout.global_batch = global_batch;
  p.training.global_batch = global_batch;
  p.training.precision = Precision::kFp32;
  p.training.lr = 3e-3;
  p.training.seed = 7;
  return p;
}

//! The second memory-truth model: 6 layers, hidden 256 (4 heads, ffn 1024, seq 128).
inline Plan WidePlan(const std::string& layout, int64_t global_batch) {
  Plan p = TinyPlan(layout, global_batch);
  p.model.name = "gpt-6x256";
  p.model.layers = 6;
  p.model.hidden = 256;
  p.model.heads = 4;
  p.model.kv_heads = 4;
  p.model.ffn_hidden = 1024;
  p.model.seq_len = 128;
  return p;
}

//! gpt-tiny in the Llama style: RMSNorm, SwiGLU, rotary positions, no biases, an untied head,
//! grouped-query attention (2 kv heads), ffn 128.
inline Plan LlamaTinyPlan(const std::string& layout, int64_t global_batch) {
  Plan p = TinyPlan(layout, global_batch);
  p.model.name = "llama-tiny";
  p.model.norm = NormKind::kRmsNorm;
  p.model.mlp = MlpKind::kSwiglu;
  p.model.position = PositionKind::kRotary;
  p.model.bias = false;
  p.model.tie_embeddings = false;
  p.model.kv_heads = 2;
  p.model.ffn_hidden = 128;
  return p;
}

//! Every backend this binary can create (CPU always; CUDA where a GPU is present: the CUDA
//! instances run only on a GPU machine, and a ctest entry needs no gpu label to pick them up).
inline std::vector<std::string> UsableBackends() {
  std::vector<std::string> out;
  for (const std::string& name : CompiledBackends()) {
    if (CreateBackend(name)) out.push_back(name);
  }
  return out;
}

//! A small mixture-of-experts model in the Llama style: 4 layers (the first dense), 4 routed experts
//! of 32 columns, top-2, one shared expert.
inline Plan MoePlan(const std::string& layout, int64_t global_batch) {
  Plan p = TinyPlan(layout, global_batch);
  p.model.name = "moe-tiny";
  p.model.norm = NormKind::kRmsNorm;
  p.model.mlp = MlpKind::kSwiglu;
  p.model.position = PositionKind::kRotary;
  p.model.bias = false;
  p.model.tie_embeddings = false;
  p.model.ffn_hidden = 128;
  p.model.experts = 4;
  p.model.experts_per_token = 2;
  p.model.moe_ffn_hidden = 32;
  p.model.shared_experts = 1;
  p.model.dense_layers = 1;
  return p;
}

struct TrainOutcome {
  std::vector<double> losses;
  std::vector<double> grad_norms;  //!< global gradient norm before clipping, per step
  std::vector<double> aux_losses;  //!< MoE auxiliary losses, per step (0 for a dense model)
  int64_t peak_bytes = 0;
};

inline Result<TrainOutcome> Train(const Plan& plan, Communicator& world, int steps,
                                  const TrainerOptions& options = {}) {
  CpuBackend backend;
  auto t = Trainer::Create(plan, backend, world, options);
  if (!t) return t.error();
  TrainOutcome out;
  for (int i = 0; i < steps; ++i) {
    auto r = (*t)->Step();
    if (!r) return r.error();
    out.losses.push_back(r->loss);
    out.grad_norms.push_back(r->grad_norm);
    out.aux_losses.push_back(r->aux_loss);
  }
  out.peak_bytes = backend.memory().peak_bytes;
  return out;
}

inline double MaxRelDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1e-12, std::abs(b[i])));
  }
  return a.size() == b.size() ? worst : 1e9;
}

}  // namespace parallax::executor::testing
