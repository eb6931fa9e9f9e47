#include "model/model_spec.h"

#include "model/hf_import.h"

#include <algorithm>

namespace parallax {
namespace {

constexpr int64_t kModelVersion = 1;

// LLaMA's SwiGLU width: 2/3 of 4h, rounded up to a multiple of 256 (Touvron et al. 2023).
int64_t DefaultFfnHidden(const ModelSpec& m) {
  if (m.mlp == MlpKind::kGelu) return 4 * m.hidden;
  const int64_t raw = 8 * m.hidden / 3;
  return (raw + 255) / 256 * 256;
}

std::string Str(int64_t v) { return std::to_string(v); }

template <class Fail>
Status ValidateMoe(const ModelSpec& m, const Fail& fail) {
  if (m.experts < 0) return fail("experts", "must be >= 0 (0 = dense)");
  if (m.experts == 0) {
    const std::pair<const char*, int64_t> moe_only[] = {{"experts_per_token", m.experts_per_token},
                                                        {"moe_ffn_hidden", m.moe_ffn_hidden},
                                                        {"shared_experts", m.shared_experts},
                                                        {"dense_layers", m.dense_layers}};
    for (const auto& [key, v] : moe_only) {
      if (v != 0) return fail(key, "needs experts > 0 (a dense model has none)");
    }
    return Status::Ok();
  }
  if (m.experts_per_token <= 0 || m.experts_per_token > m.experts) {
    return fail("experts_per_token", "must be in 1..experts=" + Str(m.experts) + " (got " + Str(m.experts_per_token) + ")");
  }
  if (m.moe_ffn_hidden <= 0) return fail("moe_ffn_hidden", "must be > 0 (got " + Str(m.moe_ffn_hidden) + ")");
  if (m.shared_experts < 0) return fail("shared_experts", "must be >= 0");
  if (m.dense_layers < 0 || m.dense_layers >= m.layers) {
    return fail("dense_layers", "must be in 0..layers-1=" + Str(m.layers - 1) + " (got " + Str(m.dense_layers) + ")");
  }
  if (m.moe_layer_freq <= 0) return fail("moe_layer_freq", "must be > 0 (got " + Str(m.moe_layer_freq) + ")");
  if (MoeLayerCount(m) == 0) return fail("moe_layer_freq", "leaves no MoE layer after the dense_layers");
  if (m.router_groups <= 0 || m.experts % m.router_groups != 0) {
    return fail("router_groups", "router_groups=" + Str(m.router_groups) + " does not divide experts=" + Str(m.experts));
  }
  if (m.router_group_topk <= 0 || m.router_group_topk > m.router_groups) {
    return fail("router_group_topk", "must be in 1..router_groups=" + Str(m.router_groups));
  }
  if (m.experts_per_token > m.router_group_topk * (m.experts / m.router_groups)) {
    return fail("router_group_topk", "router_group_topk=" + Str(m.router_group_topk) + " groups of " +
                                         Str(m.experts / m.router_groups) + " experts cannot hold experts_per_token=" +
                                         Str(m.experts_per_token));
  }
  return Status::Ok();
}

template <class Fail>
Status ValidateMla(const ModelSpec& m, const Fail& fail) {
  const std::pair<const char*, int64_t> dims[] = {{"kv_lora_rank", m.kv_lora_rank},
                                                  {"qk_nope_head_dim", m.qk_nope_head_dim},
                                                  {"qk_rope_head_dim", m.qk_rope_head_dim},
                                                  {"v_head_dim", m.v_head_dim}};
  if (!m.mla()) {
    for (const auto& [key, v] : dims) {
      if (v != 0) return fail(key, "needs attention \"mla\"");
    }
    if (m.q_lora_rank != 0) return fail("q_lora_rank", "needs attention \"mla\"");
    return Status::Ok();
  }
  for (const auto& [key, v] : dims) {
    if (v <= 0) return fail(key, "must be > 0 with attention \"mla\" (got " + Str(v) + ")");
  }
  if (m.q_lora_rank < 0) return fail("q_lora_rank", "must be >= 0 (0 = queries projected directly)");
  if (m.qk_rope_head_dim % 2 != 0) return fail("qk_rope_head_dim", "rotary embeddings need an even width");
  if (m.kv_heads != m.heads) return fail("kv_heads", "multi-head latent attention has kv_heads = heads");
  if (m.head_size != 0) return fail("head_dim", "is qk_nope_head_dim + qk_rope_head_dim with attention \"mla\"");
  return Status::Ok();
}

}  // namespace

const char* ToString(MlpKind k) { return k == MlpKind::kGelu ? "gelu" : "swiglu"; }
const char* ToString(NormKind k) { return k == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }
const char* ToString(PositionKind k) { return k == PositionKind::kLearned ? "learned" : "rotary"; }
const char* ToString(AttentionKind k) { return k == AttentionKind::kMha ? "mha" : "mla"; }
const char* ToString(RouterKind k) { return k == RouterKind::kSoftmax ? "softmax" : "sigmoid"; }
const char* ToString(WindowKind k) { return k == WindowKind::kSliding ? "sliding" : "chunked"; }

bool IsMoeLayer(const ModelSpec& m, int64_t layer) {
  return m.moe() && layer >= m.dense_layers && layer % m.moe_layer_freq == 0;
}

int64_t MoeLayerCount(const ModelSpec& m) {
  int64_t n = 0;
  for (int64_t i = 0; i < m.layers; ++i) n += IsMoeLayer(m, i) ? 1 : 0;
  return n;
}

bool IsLocalAttentionLayer(const ModelSpec& m, int64_t layer) {
  if (m.attention_window <= 0) return false;
  return m.full_attention_every <= 0 || (layer + 1) % m.full_attention_every != 0;
}

int64_t AttendedKeys(const ModelSpec& m, int64_t layer, int64_t seq_len) {
  return IsLocalAttentionLayer(m, layer) ? std::min(seq_len, m.attention_window) : seq_len;
}

Status ValidateModel(const ModelSpec& m, const std::string& file, const std::string& path) {
  auto fail = [&](const char* key, const std::string& what) {
    return Status(BadInput(file + ": " + path + "/" + key + ": " + what));
  };
  if (m.name.empty()) return fail("name", "must not be empty");
  const std::pair<const char*, int64_t> sizes[] = {{"layers", m.layers}, {"hidden", m.hidden},
                                                   {"heads", m.heads},   {"kv_heads", m.kv_heads},
                                                   {"vocab", m.vocab},   {"seq_len", m.seq_len},
                                                   {"ffn_hidden", m.ffn_hidden}};
  for (const auto& [key, v] : sizes) {
    if (v <= 0) return fail(key, "must be > 0 (got " + std::to_string(v) + ")");
  }
  if (m.head_size == 0 && !m.mla() && m.hidden % m.heads != 0) {
    return fail("heads", "heads=" + std::to_string(m.heads) + " does not divide hidden=" +
                             std::to_string(m.hidden) + " (give head_dim when heads x head_dim != hidden)");
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    return fail("kv_heads", "kv_heads=" + std::to_string(m.kv_heads) + " does not divide heads=" +
                                std::to_string(m.heads));
  }
  if (m.position == PositionKind::kRotary && !m.mla() && m.head_dim() % 2 != 0) {
    if (m.head_size > 0) return fail("head_dim", "rotary embeddings need an even head dimension");
    return fail("heads", "rotary embeddings need an even head dimension (hidden/heads = " +
                             std::to_string(m.head_dim()) + ")");
  }
  PX_TRY(ValidateMoe(m, fail));
  PX_TRY(ValidateMla(m, fail));
  if (m.attention_window < 0) return fail("attention_window", "must be >= 0");
  if (m.full_attention_every < 0) return fail("full_attention_every", "must be >= 0");
  if (m.mtp_layers < 0) return fail("mtp_layers", "must be >= 0");
  return Status::Ok();
}

namespace {

void ReadMoeFields(ObjectReader& r, ModelSpec& m) {
  m.experts = r.NonNegativeInt("experts", 0);
  m.experts_per_token = r.NonNegativeInt("experts_per_token", 0);
  m.moe_ffn_hidden = r.NonNegativeInt("moe_ffn_hidden", 0);
  m.shared_experts = r.NonNegativeInt("shared_experts", 0);
  m.dense_layers = r.NonNegativeInt("dense_layers", 0);
  m.moe_layer_freq = r.PositiveInt("moe_layer_freq", 1);
  m.router = r.Choice("router", {"softmax", "sigmoid"}, "softmax") == "softmax" ? RouterKind::kSoftmax
                                                                                : RouterKind::kSigmoid;
  m.router_groups = r.PositiveInt("router_groups", 1);
  m.router_group_topk = r.PositiveInt("router_group_topk", 1);
  m.mtp_layers = r.NonNegativeInt("mtp_layers", 0);
}

void ReadAttentionFields(ObjectReader& r, ModelSpec& m) {
  m.attention = r.Choice("attention", {"mha", "mla"}, "mha") == "mha" ? AttentionKind::kMha : AttentionKind::kMla;
  m.q_lora_rank = r.NonNegativeInt("q_lora_rank", 0);
  m.kv_lora_rank = r.NonNegativeInt("kv_lora_rank", 0);
  m.qk_nope_head_dim = r.NonNegativeInt("qk_nope_head_dim", 0);
  m.qk_rope_head_dim = r.NonNegativeInt("qk_rope_head_dim", 0);
  m.v_head_dim = r.NonNegativeInt("v_head_dim", 0);
  m.attention_window = r.NonNegativeInt("attention_window", 0);
  m.window_kind = r.Choice("window_kind", {"sliding", "chunked"}, "sliding") == "sliding" ? WindowKind::kSliding
                                                                                          : WindowKind::kChunked;
  m.full_attention_every = r.NonNegativeInt("full_attention_every", 0);
}

//! The fields beyond a dense multi-head model's, written only where they differ from the default
//! (a dense model's file is unchanged).
void WriteOptionalFields(const ModelSpec& m, Json& j) {
  const ModelSpec d;
  auto put = [&](const char* key, int64_t v, int64_t dflt) {
    if (v != dflt) j[key] = v;
  };
  put("head_dim", m.head_size, d.head_size);
  put("experts", m.experts, d.experts);
  put("experts_per_token", m.experts_per_token, d.experts_per_token);
  put("moe_ffn_hidden", m.moe_ffn_hidden, d.moe_ffn_hidden);
  put("shared_experts", m.shared_experts, d.shared_experts);
  put("dense_layers", m.dense_layers, d.dense_layers);
  put("moe_layer_freq", m.moe_layer_freq, d.moe_layer_freq);
  if (m.router != d.router) j["router"] = ToString(m.router);
  put("router_groups", m.router_groups, d.router_groups);
  put("router_group_topk", m.router_group_topk, d.router_group_topk);
  put("mtp_layers", m.mtp_layers, d.mtp_layers);
  if (m.attention != d.attention) j["attention"] = ToString(m.attention);
  put("q_lora_rank", m.q_lora_rank, d.q_lora_rank);
  put("kv_lora_rank", m.kv_lora_rank, d.kv_lora_rank);
  put("qk_nope_head_dim", m.qk_nope_head_dim, d.qk_nope_head_dim);
  put("qk_rope_head_dim", m.qk_rope_head_dim, d.qk_rope_head_dim);
  put("v_head_dim", m.v_head_dim, d.v_head_dim);
  put("attention_window", m.attention_window, d.attention_window);
  if (m.window_kind != d.window_kind) j["window_kind"] = ToString(m.window_kind);
  put("full_attention_every", m.full_attention_every, d.full_attention_every);
}

}  // namespace

Result<ModelSpec> ModelFromJson(const Json& j, const std::string& file, const std::string& path) {
  return CatchJsonErrors([&]() -> Result<ModelSpec> {
    ObjectReader r(j, file, path);
    r.Header("model", kModelVersion);
    ModelSpec m;
    m.name = r.String("name");
    m.layers = r.PositiveInt("layers");
    m.hidden = r.PositiveInt("hidden");
    m.heads = r.PositiveInt("heads");
    m.vocab = r.PositiveInt("vocab");
    m.seq_len = r.PositiveInt("seq_len");
    m.mlp = r.Choice("mlp", {"gelu", "swiglu"}, "gelu") == "gelu" ? MlpKind::kGelu : MlpKind::kSwiglu;
    const bool llama_like = m.mlp == MlpKind::kSwiglu;
    m.kv_heads = r.PositiveInt("kv_heads", m.heads);
    m.ffn_hidden = r.PositiveInt("ffn_hidden", 0);
    m.norm = r.Choice("norm", {"layernorm", "rmsnorm"}, llama_like ? "rmsnorm" : "layernorm") == "layernorm"
                 ? NormKind::kLayerNorm
                 : NormKind::kRmsNorm;
    m.position = r.Choice("position", {"learned", "rotary"}, llama_like ? "rotary" : "learned") == "learned"
                     ? PositionKind::kLearned
                     : PositionKind::kRotary;
    m.tie_embeddings = r.Bool("tie_embeddings", !llama_like);
    m.bias = r.Bool("bias", !llama_like);
    m.dropout = r.Bool("dropout", false);
    m.head_size = r.NonNegativeInt("head_dim", 0);
    ReadMoeFields(r, m);
    ReadAttentionFields(r, m);
    r.Finish();
    // An MoE model's dense layers default to the experts' width (Mixtral and Grok-1 have none).
    if (m.ffn_hidden == 0) m.ffn_hidden = m.moe() && m.moe_ffn_hidden > 0 ? m.moe_ffn_hidden : DefaultFfnHidden(m);
    PX_TRY(ValidateModel(m, file, path));
    return m;
  });
}

Json ModelToJson(const ModelSpec& m) {
  Json j{{"kind", "model"},
              {"version", kModelVersion},
              {"name", m.name},
              {"layers", m.layers},
              {"hidden", m.hidden},
              {"heads", m.heads},
              {"kv_heads", m.kv_heads},
              {"vocab", m.vocab},
              {"seq_len", m.seq_len},
              {"ffn_hidden", m.ffn_hidden},
              {"mlp", ToString(m.mlp)},
              {"norm", ToString(m.norm)},
              {"position", ToString(m.position)},
              {"tie_embeddings", m.tie_embeddings},
              {"bias", m.bias},
              {"dropout", m.dropout}};
  WriteOptionalFields(m, j);
  return j;
}

Result<ModelSpec> LoadModelFile(const std::string& path) {
  PX_ASSIGN(const Json j, LoadJsonFile(path));
  if (j.is_object() && !j.contains("kind")) return ModelFromHfConfig(j, path);
  return ModelFromJson(j, path);
}

}  // namespace parallax
