#include "model/counting.h"

#include "model/op_catalogue.h"

namespace parallax {

int64_t NormParams(const ModelSpec& m) { return m.norm == NormKind::kLayerNorm ? 2 * m.hidden : m.hidden; }

namespace {

int64_t FcInWidth(const ModelSpec& m) { return m.mlp == MlpKind::kSwiglu ? 2 * m.ffn_hidden : m.ffn_hidden; }
int64_t SeqOf(const ModelSpec& m, int64_t seq_len) { return seq_len > 0 ? seq_len : m.seq_len; }

}  // namespace

ModelCounts CountParams(const ModelSpec& m) {
  const int64_t qkv_out = m.hidden + 2 * m.kv_dim();
  const int64_t bias = m.bias ? 1 : 0;
  ModelCounts c;
  c.layer_ops = {
      {"attn_norm", NormParams(m), 0},
      {"qkv", m.hidden * qkv_out + bias * qkv_out, 0},
      {"attn_core", 0, 0},
      {"attn_out", m.hidden * m.hidden + bias * m.hidden, 0},
      {"mlp_norm", NormParams(m), 0},
      {"fc1", m.hidden * FcInWidth(m) + bias * FcInWidth(m), 0},
      {"act", 0, 0},
      {"fc2", m.ffn_hidden * m.hidden + bias * m.hidden, 0},
  };
  for (const auto& op : c.layer_ops) c.params_per_layer += op.params;
  c.params_embedding = m.vocab * m.hidden + (m.position == PositionKind::kLearned ? m.seq_len * m.hidden : 0);
  c.params_lm_head = m.tie_embeddings ? 0 : m.vocab * m.hidden;
  c.params_final_norm = NormParams(m);
  c.outer_ops = {{"embedding", c.params_embedding, 0},
                 {"final_norm", c.params_final_norm, 0},
                 {"lm_head", c.params_lm_head, 0}};
  c.params_total = m.layers * c.params_per_layer + c.params_embedding + c.params_lm_head + c.params_final_norm;
  return c;
}

ModelCounts CountModel(const ModelSpec& m, int64_t seq_len) {
  const double s = static_cast<double>(SeqOf(m, seq_len));
  ModelCounts c = CountParams(m);
  // FLOPs from the op catalogue (one micro-batch of one sequence, tp 1): its convention counts
  // attention over the full s x s square, whatever kernel runs it.
  OpShapeKey key;
  key.seq_len = static_cast<int64_t>(s);
  static const ImplementationProfile kDefault = DefaultImplementation();  // immutable; built once
  const OpCatalogue cat = BuildOpCatalogue(m, key, kDefault);
  for (const OpSpec& o : cat.layer.fwd) {
    for (auto& op : c.layer_ops) {
      if (op.name == ToString(o.op)) op.fwd_flops_per_token += o.flops / s;
    }
  }
  for (const auto& op : c.layer_ops) c.fwd_flops_per_token_per_layer += op.fwd_flops_per_token;
  c.fwd_flops_per_token_head = 0;
  for (const OpSpec& o : cat.head.fwd) c.fwd_flops_per_token_head += o.flops / s;
  c.outer_ops.back().fwd_flops_per_token = c.fwd_flops_per_token_head;
  c.fwd_flops_per_token = static_cast<double>(m.layers) * c.fwd_flops_per_token_per_layer + c.fwd_flops_per_token_head;
  return c;
}

double AttentionCoreFlopsPerToken(const ModelSpec& m, int64_t seq_len) {
  for (const OpCount& op : CountModel(m, seq_len).layer_ops) {
    if (op.name == "attn_core") return op.fwd_flops_per_token;
  }
  return 0;
}

double TrainingFlopsPerToken(const ModelSpec& m, int64_t seq_len, Recompute recompute) {
  const ModelCounts c = CountModel(m, seq_len);
  double per_layer = 3.0 * c.fwd_flops_per_token_per_layer;
  if (recompute == Recompute::kFull) per_layer += c.fwd_flops_per_token_per_layer;
  if (recompute == Recompute::kSelective) per_layer += AttentionCoreFlopsPerToken(m, seq_len);
  return static_cast<double>(m.layers) * per_layer + 3.0 * c.fwd_flops_per_token_head;
}

ActivationOptions ForImplementation(ActivationOptions o, const ImplementationProfile& impl) {
  o.dropout = impl.applies_dropout.value;
  o.attention_keeps_statistics = AttentionKeepsStatistics(impl);
  o.fp32_cross_entropy = impl.fp32_cross_entropy.value;
  return o;
}

int64_t ActivationBytesPerLayer(const ModelSpec& m, const ActivationOptions& o) {
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
  const int64_t seq_shardable = 4 * e * sbh + 2 * drop * sbh + norm_stats;
  const int64_t sbf = s * b * m.ffn_hidden;
  const int64_t qkv_saved = e * (sbh + 2 * s * b * m.kv_dim());
  const int64_t mlp_saved = m.mlp == MlpKind::kSwiglu ? 3 * e * sbf : 2 * e * sbf;
  int64_t tp_sharded = qkv_saved + e * sbh + mlp_saved;
  if (o.recompute == Recompute::kNone) {
    const int64_t as2b = m.heads * s * s * b;
    if (o.attention_keeps_statistics) {
      tp_sharded += 4 * m.heads * s * b;  // fp32 log-sum-exp per query row; dropout replayed from its RNG state
    } else {
      tp_sharded += e * as2b + drop * (as2b + e * as2b);  // softmax out, dropout mask, dropout out
    }
  }
  return (o.sequence_parallel ? seq_shardable / t : seq_shardable) + tp_sharded / t;
}

int64_t RecomputeWorkingBytes(const ModelSpec& m, const ActivationOptions& o) {
  if (o.recompute == Recompute::kNone) return 0;
  ActivationOptions none = o;
  none.recompute = Recompute::kNone;
  const int64_t whole = ActivationBytesPerLayer(m, none);
  // Selective: only what it dropped (the attention core's probabilities or statistics) comes back, one layer at a time.
  return o.recompute == Recompute::kSelective ? whole - ActivationBytesPerLayer(m, o) : whole;
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

}  // namespace parallax
