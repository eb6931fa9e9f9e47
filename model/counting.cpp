#include "model/counting.h"

#include <algorithm>

#include "model/op_catalogue.h"

namespace parallax {

int64_t NormParams(const ModelSpec& m) { return m.norm == NormKind::kLayerNorm ? 2 * m.hidden : m.hidden; }

namespace {

int64_t FcInWidth(const ModelSpec& m, int64_t f) { return m.mlp == MlpKind::kSwiglu ? 2 * f : f; }
int64_t FcInWidth(const ModelSpec& m) { return FcInWidth(m, m.ffn_hidden); }
int64_t SeqOf(const ModelSpec& m, int64_t seq_len) { return seq_len > 0 ? seq_len : m.seq_len; }

//! Weights (GEMM parameters, the FLOPs' 2x) and all parameters of the QKV projection(s).
struct QkvParams {
  int64_t gemm = 0, total = 0;
};

// Multi-head latent attention (DeepSeek-V2 paper, section 2.1.2; DeepSeek-V3's modeling code): the
// query down-projection (or one direct projection without q_lora_rank), the joint KV down-projection
// plus the decoupled rotary key, the up-projections of keys and values, RMSNorms on both latents.
QkvParams Qkv(const ModelSpec& m) {
  const int64_t h = m.hidden, bias = m.bias ? 1 : 0;
  if (!m.mla()) {
    const int64_t out = m.q_dim() + 2 * m.kv_dim();
    return {h * out, h * out + bias * out};
  }
  const int64_t dqk = m.head_dim();
  const int64_t q = m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank * m.heads * dqk : h * m.heads * dqk;
  const int64_t kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * m.heads * (m.qk_nope_head_dim + m.v_head_dim);
  return {q + kv, q + kv + m.q_lora_rank + m.kv_lora_rank};
}

//! One expert (routed or shared) of moe_ffn_hidden: fc1 (gate + up for SwiGLU) and fc2.
int64_t ExpertGemmParams(const ModelSpec& m) { return (FcInWidth(m, m.moe_ffn_hidden) + m.moe_ffn_hidden) * m.hidden; }
int64_t ExpertParams(const ModelSpec& m) {
  return ExpertGemmParams(m) + (m.bias ? FcInWidth(m, m.moe_ffn_hidden) + m.hidden : 0);
}

}  // namespace

std::vector<OpCount> LayerOps(const ModelSpec& m, int64_t layer, int64_t seq_len) {
  const int64_t h = m.hidden, bias = m.bias ? 1 : 0;
  const double keys = static_cast<double>(AttendedKeys(m, layer, SeqOf(m, seq_len)));
  const QkvParams qkv = Qkv(m);
  const int64_t out = m.attn_out_dim();
  // QK^T and AV over the keys each query sees: 2 keys (heads x qk width) + 2 keys (heads x v width).
  const double core = 2 * keys * static_cast<double>(m.heads * (m.head_dim() + m.value_dim()));
  std::vector<OpCount> ops = {
      {"attn_norm", NormParams(m), 0, NormParams(m)},
      {"qkv", qkv.total, 2.0 * static_cast<double>(qkv.gemm), qkv.total},
      {"attn_core", 0, core, 0},
      {"attn_out", out * h + bias * h, 2.0 * static_cast<double>(out * h), out * h + bias * h},
      {"mlp_norm", NormParams(m), 0, NormParams(m)},
  };
  if (!IsMoeLayer(m, layer)) {
    const int64_t fc1 = h * FcInWidth(m) + bias * FcInWidth(m), fc2 = m.ffn_hidden * h + bias * h;
    ops.push_back({"fc1", fc1, 2.0 * static_cast<double>(h * FcInWidth(m)), fc1});
    ops.push_back({"act", 0, 0, 0});
    ops.push_back({"fc2", fc2, 2.0 * static_cast<double>(m.ffn_hidden * h), fc2});
    return ops;
  }
  // Router: one h x E GEMM (+ a bias: DeepSeek-V3's expert-score correction, gpt-oss's router bias).
  const int64_t router = h * m.experts + (m.router == RouterKind::kSigmoid || m.bias ? m.experts : 0);
  ops.push_back({"router", router, 2.0 * static_cast<double>(h * m.experts), router});
  const double expert_flops = 2.0 * static_cast<double>(ExpertGemmParams(m));
  ops.push_back({"experts", m.experts * ExpertParams(m), static_cast<double>(m.experts_per_token) * expert_flops,
                 m.experts_per_token * ExpertParams(m)});
  if (m.shared_experts > 0) {
    ops.push_back({"shared_experts", m.shared_experts * ExpertParams(m),
                   static_cast<double>(m.shared_experts) * expert_flops, m.shared_experts * ExpertParams(m)});
  }
  return ops;
}

ModelCounts CountModel(const ModelSpec& m, int64_t seq_len) {
  const int64_t s = SeqOf(m, seq_len);
  ModelCounts c;
  for (int64_t i = 0; i < m.layers; ++i) {
    LayerCount lc;
    lc.moe = IsMoeLayer(m, i);
    lc.local = IsLocalAttentionLayer(m, i);
    const std::vector<OpCount> ops = LayerOps(m, i, s);
    for (const OpCount& op : ops) {
      lc.params += op.params;
      lc.active_params += op.active_params;
      lc.fwd_flops_per_token += op.fwd_flops_per_token;
      if (op.name == "attn_core") lc.attn_core_flops_per_token = op.fwd_flops_per_token;
    }
    if (i == 0) c.layer_ops = ops;
    if (lc.moe && c.moe_layer_ops.empty()) c.moe_layer_ops = ops;
    c.moe_layers += lc.moe ? 1 : 0;
    c.layers.push_back(lc);
  }
  c.params_per_layer = c.layers.front().params;
  c.fwd_flops_per_token_per_layer = c.layers.front().fwd_flops_per_token;
  c.params_embedding = m.vocab * m.hidden + (m.position == PositionKind::kLearned ? m.seq_len * m.hidden : 0);
  c.params_lm_head = m.tie_embeddings ? 0 : m.vocab * m.hidden;
  c.params_final_norm = NormParams(m);
  c.fwd_flops_per_token_head = 2.0 * static_cast<double>(m.vocab * m.hidden);
  c.outer_ops = {{"embedding", c.params_embedding, 0, m.hidden},
                 {"final_norm", c.params_final_norm, 0, c.params_final_norm},
                 {"lm_head", c.params_lm_head, c.fwd_flops_per_token_head, c.params_lm_head}};
  c.params_total = c.params_embedding + c.params_lm_head + c.params_final_norm;
  c.params_active = c.params_embedding + c.params_final_norm + c.params_lm_head;
  c.fwd_flops_per_token = c.fwd_flops_per_token_head;
  for (const LayerCount& lc : c.layers) {
    c.params_total += lc.params;
    c.params_active += lc.active_params;
    c.fwd_flops_per_token += lc.fwd_flops_per_token;
  }
  // Each MTP module: its own parameters and one transformer layer of the last layer's kind.
  c.params_mtp = m.mtp_layers * (MtpOwnParams(m, 1) + c.layers.back().params);
  return c;
}

const ModelCounts& CountParams(const ModelSpec& m) {
  // The search asks once per layout for the same model: keep the last model's counts per thread.
  thread_local ModelSpec last;
  thread_local ModelCounts counts;
  thread_local bool valid = false;
  if (!valid || last != m) {
    counts = CountModel(m);
    last = m;
    valid = true;
  }
  return counts;
}

double AttentionCoreFlopsPerToken(const ModelSpec& m, int64_t seq_len) {
  return CountModel(m, seq_len).layers.front().attn_core_flops_per_token;
}

double SelectiveModuleFlopsPerToken(const ModelSpec& m, bool moe_layer, uint32_t selective_modules) {
  double flops = 0;
  if (m.mla() && (selective_modules & kRecomputeMlaUpProj) != 0) {
    const int64_t q_in = m.q_lora_rank > 0 ? m.q_lora_rank : m.hidden;
    const int64_t kv_up = m.heads * (m.qk_nope_head_dim + m.v_head_dim);
    flops += 2.0 * static_cast<double>(m.q_dim() * q_in + kv_up * m.kv_lora_rank);
  }
  if (!moe_layer && (selective_modules & kRecomputeMlp) != 0) {
    flops += 2.0 * static_cast<double>(m.hidden) * static_cast<double>(FcInWidth(m) + m.ffn_hidden);
  }
  return flops;
}

double TrainingFlopsPerToken(const ModelSpec& m, int64_t seq_len, Recompute recompute, uint32_t selective_modules) {
  const ModelCounts c = CountModel(m, seq_len);
  double layers = 0;
  for (const LayerCount& lc : c.layers) {
    layers += 3.0 * lc.fwd_flops_per_token;
    if (recompute == Recompute::kFull) layers += lc.fwd_flops_per_token;
    if (recompute == Recompute::kSelective && (selective_modules & kRecomputeCoreAttn) != 0) {
      layers += lc.attn_core_flops_per_token;
    }
    if (recompute == Recompute::kSelective) layers += SelectiveModuleFlopsPerToken(m, lc.moe, selective_modules);
  }
  return layers + 3.0 * c.fwd_flops_per_token_head;
}

ActivationOptions ForImplementation(ActivationOptions o, const ImplementationProfile& impl, Precision precision) {
  o.dropout = impl.applies_dropout.value;
  o.attention_keeps_statistics = AttentionKeepsStatistics(impl);
  o.fp32_cross_entropy = impl.fp32_cross_entropy.value;
  const bool fp8_saves = precision == Precision::kFp8 && impl.fp8_saves_quantized_inputs.value;
  const Fp8Recipe recipe = impl.fp8_recipe.value;
  const bool block_scales = recipe == Fp8Recipe::kMxfp8 || recipe == Fp8Recipe::kBlockwise;
  o.fp8_input_32nds = fp8_saves ? (block_scales ? 33 : 32) : 0;
  o.fp8_proj_copy = fp8_saves && recipe == Fp8Recipe::kDelayed;
  o.moe_combine_keeps_outputs = !impl.moe_probs_in_activation.value;
  return o;
}

namespace {

//! Per token, the elements the attention keeps beyond its input: Q, K, V (MLA: the two latents and
//! the decoupled rotary key too) and the output projection's input.
int64_t AttentionSavedWidth(const ModelSpec& m) {
  if (!m.mla()) return m.q_dim() + 2 * m.kv_dim() + m.attn_out_dim();
  return 2 * m.q_dim() + m.attn_out_dim() + m.heads * m.value_dim() + m.q_lora_rank + m.kv_lora_rank +
         m.qk_rope_head_dim;
}

//! Bytes a linear layer keeps of `elements` input elements: its FP8 copy where the implementation
//! keeps that (ActivationOptions::fp8_input_32nds), else the input in the element size.
int64_t LinearInputBytes(const ActivationOptions& o, int64_t elements) {
  return o.fp8_input_32nds > 0 ? (elements * o.fp8_input_32nds + 31) / 32 : o.bytes_per_element * elements;
}

int64_t LayerActivationBytes(const ModelSpec& m, int64_t layer, const ActivationOptions& o, int64_t etp) {
  const int64_t s = SeqOf(m, o.seq_len);
  const int64_t b = o.micro_batch;
  const int64_t e = o.bytes_per_element;
  const int64_t t = o.tp;
  const int64_t sbh = s * b * m.hidden;
  const int64_t drop = m.dropout && o.dropout ? 1 : 0;
  if (o.recompute == Recompute::kFull) return o.sequence_parallel ? e * sbh / t : e * sbh;

  // Korthikanti et al. 2022, section 4.1: the part that sequence parallelism shards (norm inputs,
  // QKV and fc1 inputs, the two dropout masks) and the part tensor parallelism shards; plus the
  // norms' fp32 statistics (two per token per norm: LayerNorm's mean and 1/std, RMSNorm's 1/rms
  // with our executor keeping a mean slot too), which the paper's count omits.
  const int64_t norm_stats = int64_t{16} * s * b;  // 2 norms x 2 statistics x 4 bytes
  const uint32_t redo = o.recompute == Recompute::kSelective ? o.selective_modules : 0;
  const bool moe = IsMoeLayer(m, layer);
  // The two norms' inputs, and their outputs (the QKV and fc1 / router inputs) unless the layernorm
  // module recomputes them from the inputs. Under fp8 with quantized saves, a norm output that feeds
  // linears is kept as their FP8 copies: one for a fused norm + QKV or fc1 linear, one per
  // down-projection under MLA (q and kv take the norm output apart); an MoE layer's router keeps
  // the 16-bit output (Megatron-Core moe_utils.py RouterGatingLinearFunction), counted here, and
  // its shared experts' fc1 keeps its own FP8 copy (MoeActivationBytes).
  int64_t norm_io = 2 * e * sbh;
  if ((redo & kRecomputeLayernorm) == 0) {
    const int64_t qkv_in = o.fp8_input_32nds > 0 ? (m.mla() ? 2 : 1) * LinearInputBytes(o, sbh) : e * sbh;
    norm_io += qkv_in + (moe ? e * sbh : LinearInputBytes(o, sbh));
  }
  const int64_t seq_shardable = norm_io + 2 * drop * sbh + norm_stats;
  const int64_t sbf = s * b * m.ffn_hidden;
  // mla_up_proj drops the up-projected queries, keys and values (kept: the latents, the output).
  const int64_t up_dropped = m.mla() && (redo & kRecomputeMlaUpProj) != 0 ? 2 * m.q_dim() + m.heads * m.value_dim() : 0;
  // Under the delayed recipe the output projection keeps an FP8 copy of the core attention's output
  // beside it (Megatron-Core attention.py: other recipes make linear_proj keep the original).
  const int64_t proj_copy = o.fp8_proj_copy ? LinearInputBytes(o, s * b * m.attn_out_dim()) : 0;
  const int64_t attn_saved = e * s * b * (AttentionSavedWidth(m) - up_dropped) + proj_copy;
  // A recomputed dense MLP keeps only its input (the norm's output, counted with the norms); else
  // fc1's output (the activation's input, 16-bit) and the activation's output (fc2's input).
  const bool mlp_redone = !moe && (redo & kRecomputeMlp) != 0;
  const int64_t mlp_saved = moe || mlp_redone ? 0 : e * s * b * FcInWidth(m) + LinearInputBytes(o, sbf);
  int64_t tp_sharded = attn_saved + mlp_saved;
  if ((redo & kRecomputeCoreAttn) == 0) {  // kept unless the attention core is recomputed
    const int64_t as2b = m.heads * s * AttendedKeys(m, layer, s) * b;
    if (o.attention_keeps_statistics) {
      tp_sharded += 4 * m.heads * s * b;  // fp32 log-sum-exp per query row; dropout replayed from its RNG state
    } else {
      tp_sharded += e * as2b + drop * (as2b + e * as2b);  // softmax out, dropout mask, dropout out
    }
  }
  const int64_t moe_bytes = moe ? MoeActivationBytes(m, o, etp) : 0;
  return (o.sequence_parallel ? seq_shardable / t : seq_shardable) + tp_sharded / t + moe_bytes;
}

}  // namespace

int64_t MoeActivationBytes(const ModelSpec& m, const ActivationOptions& o, int64_t etp) {
  if (!m.moe() || o.recompute == Recompute::kFull) return 0;
  const int64_t t = o.tp, et = etp > 0 ? etp : o.tp;
  const int64_t e = o.bytes_per_element;
  const int64_t tokens = SeqOf(m, o.seq_len) * o.micro_batch / (o.sequence_parallel ? t : 1);
  const int64_t f = m.moe_ffn_hidden;
  // The routed experts' activation output is not kept when the moe_act module recomputes it.
  const bool redo_act = o.recompute == Recompute::kSelective && (o.selective_modules & kRecomputeMoeAct) != 0;
  const int64_t act = redo_act ? 0 : f;
  // Routed: k copies of each of the etp group's tokens arrive (dispatch buffer, h each: fc1's input,
  // its FP8 copy under quantized saves), each kept at fc1 output (16-bit) and activation output
  // (fc2's input) over f / etp; the combine keeps the rank's own k copies (h each) for the
  // probabilities' gradient, after the etp reduce-scatter (Megatron-Core token_dispatcher.py:
  // reduce_scatter over the expert-TP group, the all-to-all, then unpermute with the
  // probabilities), not the etp group's. Where the probabilities multiply the activation instead,
  // the combine keeps nothing and the activation keeps its unweighted output (16-bit, f / etp, even
  // where a fused kernel recomputes it; not when the moe_act module recomputes the activation) and
  // the fp32 probabilities of the copies it received.
  const int64_t copies = m.experts_per_token * tokens;
  const int64_t received = et * copies;
  const int64_t combine =
      o.moe_combine_keeps_outputs ? e * copies * m.hidden : e * received * act / et + 4 * received;
  const int64_t routed = LinearInputBytes(o, received * m.hidden) + e * received * FcInWidth(m, f) / et +
                         LinearInputBytes(o, received * act / et) + combine;
  const int64_t router = 4 * m.experts * tokens;  // fp32 scores (probabilities) for the backward
  // Shared experts (one MLP of shared_experts x f, split over tp) on every token of the micro-batch;
  // under quantized saves their fc1 keeps its own FP8 copy of the norm output (the router keeps the
  // 16-bit one) unless the layernorm module recomputes it (Megatron-Core moe_layer.py
  // set_for_recompute_pre_mlp_layernorm).
  const int64_t sb = SeqOf(m, o.seq_len) * o.micro_batch;
  const int64_t shared_f = m.shared_experts * f;
  const bool redo_norm = o.recompute == Recompute::kSelective && (o.selective_modules & kRecomputeLayernorm) != 0;
  const int64_t shared_in = shared_f > 0 && o.fp8_input_32nds > 0 && !redo_norm ? LinearInputBytes(o, tokens * m.hidden) : 0;
  const int64_t shared = shared_f > 0 ? (e * sb * FcInWidth(m, shared_f) + LinearInputBytes(o, sb * shared_f)) / t + shared_in : 0;
  return routed + router + shared;
}

int64_t ActivationBytesOfLayer(const ModelSpec& m, int64_t layer, const ActivationOptions& o, int64_t etp) {
  return LayerActivationBytes(m, layer, o, etp);
}

int64_t ActivationBytesPerLayer(const ModelSpec& m, const ActivationOptions& o) {
  return LayerActivationBytes(m, 0, o, 0);
}

int64_t RecomputeWorkingBytes(const ModelSpec& m, const ActivationOptions& o) {
  if (o.recompute == Recompute::kNone) return 0;
  ActivationOptions none = o;
  none.recompute = Recompute::kNone;
  // The largest layer: layer 0, or the first MoE layer where the first ones are dense.
  int64_t layer = 0;
  while (layer + 1 < m.layers && m.moe() && !IsMoeLayer(m, layer)) ++layer;
  const int64_t whole = std::max(ActivationBytesOfLayer(m, layer, none), ActivationBytesPerLayer(m, none));
  if (o.recompute != Recompute::kSelective) return whole;
  // Selective: only what it dropped (the selected modules' outputs) comes back, one layer at a time.
  return std::max(ActivationBytesOfLayer(m, layer, none) - ActivationBytesOfLayer(m, layer, o),
                  ActivationBytesPerLayer(m, none) - ActivationBytesPerLayer(m, o));
}

int64_t EmbeddingActivationBytes(const ModelSpec& m, const ActivationOptions& o) {
  const int64_t sbh = SeqOf(m, o.seq_len) * o.micro_batch * m.hidden;
  const int64_t mask = m.dropout && o.dropout ? sbh : 0;
  return o.sequence_parallel ? mask / o.tp : mask;
}

int64_t HeadActivationBytes(const ModelSpec& m, const ActivationOptions& o) {
  const int64_t sb = SeqOf(m, o.seq_len) * o.micro_batch;
  const int64_t norm_and_head_inputs = 2 * o.bytes_per_element * sb * m.hidden;
  // Logits + fp32 softmax (Megatron), or logits + their gradient, both live in the loss backward.
  const int64_t loss_bytes = o.fp32_cross_entropy ? o.bytes_per_element + 4 : 2 * o.bytes_per_element;
  const int64_t logits = loss_bytes * sb * m.vocab / o.tp;
  return (o.sequence_parallel ? norm_and_head_inputs / o.tp : norm_and_head_inputs) + logits;
}

int64_t MtpOwnParams(const ModelSpec& m, int64_t tp) { return 2 * m.hidden * m.hidden / tp + 2 * NormParams(m); }

int64_t MtpActivationBytes(const ModelSpec& m, const ActivationOptions& o, int64_t etp) {
  const int64_t sb = SeqOf(m, o.seq_len) * o.micro_batch;
  const int64_t inputs = 4 * o.bytes_per_element * sb * m.hidden;  // two norms' inputs, [h; embedding]
  ActivationOptions kept = o;
  kept.recompute = Recompute::kNone;
  return inputs + ActivationBytesOfLayer(m, m.layers - 1, kept, etp) + HeadActivationBytes(m, o);
}

}  // namespace parallax
