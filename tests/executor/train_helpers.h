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

//! llama-tiny with multi-head latent attention (DeepSeek-V3's shape, scaled down): queries through
//! a 24-wide latent (none with `query_latent` false), a 16-wide KV latent, per-head widths 16
//! no-position + 8 rotary for queries and keys, 12 for values.
inline Plan MlaPlan(const std::string& layout, int64_t global_batch, bool query_latent = true) {
  Plan p = LlamaTinyPlan(layout, global_batch);
  p.model.name = "mla-tiny";
  p.model.attention = AttentionKind::kMla;
  p.model.kv_heads = p.model.heads;
  p.model.q_lora_rank = query_latent ? 24 : 0;
  p.model.kv_lora_rank = 16;
  p.model.qk_nope_head_dim = 16;
  p.model.qk_rope_head_dim = 8;
  p.model.v_head_dim = 12;
  return p;
}

//! LlamaTinyPlan with local attention on layers 0 and 2 (layers 1 and 3 global, full_attention_every
//! 2): a sliding window of 6 positions (gpt-oss's pattern) or chunks of 12 (Llama 4's): neither
//! lines up with the 8-position chunks of cp = 2.
inline Plan LocalAttentionPlan(const std::string& layout, int64_t global_batch, bool chunked) {
  Plan p = LlamaTinyPlan(layout, global_batch);
  p.model.name = chunked ? "llama-tiny-chunked" : "llama-tiny-sliding";
  p.model.attention_window = chunked ? 12 : 6;
  p.model.window_kind = chunked ? WindowKind::kChunked : WindowKind::kSliding;
  p.model.full_attention_every = 2;
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

// Central-difference gradient checks (one process, fp32): the layout suite compares layouts with the
// single-process run, which a backward wrong in every layout alike would pass.
struct Probe {
  ParamGroup* group = nullptr;
  int64_t index = 0;  //!< flat element in the group
};

//! The step's loss (LM + auxiliary) with element `p` set to `value`.
inline double LossAt(Trainer& t, CpuBackend& be, const Probe& p, float value) {
  be.CopyToDevice(p.group->values().at(p.index), &value, DType::kF32, 1);
  auto loss = t.ComputeGradients();
  if (!loss) throw std::runtime_error(loss.error().message);
  return *loss + t.aux_loss();
}

//! The element of parameter `name` in `g` with the largest gradient.
inline Probe LargestGradient(CpuBackend& be, ParamGroup* g, const std::string& name) {
  for (const ParamSpec& s : g->params()) {
    if (s.name != name) continue;
    std::vector<float> grad(static_cast<size_t>(s.numel()));
    be.CopyToHost(grad.data(), DType::kF32, g->grads().at(s.offset), s.numel());
    int64_t best = 0;
    for (int64_t i = 1; i < s.numel(); ++i) {
      if (std::abs(grad[static_cast<size_t>(i)]) > std::abs(grad[static_cast<size_t>(best)])) best = i;
    }
    return {g, s.offset + best};
  }
  throw std::runtime_error("no parameter " + name);
}

//! Central difference of the step's loss in element `p` against its analytic gradient: {numeric, analytic}.
inline std::pair<double, double> CheckedGradient(Trainer& t, CpuBackend& be, const Probe& p, float eps = 2e-3f) {
  float analytic = 0, w = 0;
  be.CopyToHost(&analytic, DType::kF32, p.group->grads().at(p.index), 1);
  be.CopyToHost(&w, DType::kF32, p.group->values().at(p.index), 1);
  const double numeric = (LossAt(t, be, p, w + eps) - LossAt(t, be, p, w - eps)) / (2.0 * eps);
  LossAt(t, be, p, w);
  return {numeric, analytic};
}

//! The step's loss's derivative along a fixed random direction r (entries +-1) over every element
//! of parameter `name` in `g`: {central difference, sum of r x analytic gradient}. Unlike one element,
//! this sees an error in any part of the gradient.
inline std::pair<double, double> DirectionalGradient(Trainer& t, CpuBackend& be, ParamGroup* g, const std::string& name,
                                                     float eps = 1e-3f) {
  for (const ParamSpec& s : g->params()) {
    if (s.name != name) continue;
    const auto n = static_cast<size_t>(s.numel());
    std::vector<float> grad(n), w(n), moved(n), r(n);
    be.CopyToHost(grad.data(), DType::kF32, g->grads().at(s.offset), s.numel());
    be.CopyToHost(w.data(), DType::kF32, g->values().at(s.offset), s.numel());
    uint32_t state = 12345;
    double analytic = 0;
    for (size_t i = 0; i < n; ++i) {
      state = state * 1664525u + 1013904223u;
      r[i] = (state >> 31) != 0 ? 1.0f : -1.0f;
      analytic += static_cast<double>(r[i]) * grad[i];
    }
    auto loss_at = [&](float step) {
      for (size_t i = 0; i < n; ++i) moved[i] = w[i] + step * r[i];
      be.CopyToDevice(g->values().at(s.offset), moved.data(), DType::kF32, s.numel());
      auto loss = t.ComputeGradients();
      if (!loss) throw std::runtime_error(loss.error().message);
      return *loss + t.aux_loss();
    };
    const double numeric = (loss_at(eps) - loss_at(-eps)) / (2.0 * eps);
    loss_at(0);
    return {numeric, analytic};
  }
  throw std::runtime_error("no parameter " + name);
}

inline double MaxRelDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1e-12, std::abs(b[i])));
  }
  return a.size() == b.size() ? worst : 1e9;
}

}  // namespace parallax::executor::testing
