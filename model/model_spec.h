#pragma once
// ModelSpec: a GPT/LLaMA-style pre-norm decoder-only transformer, dense or mixture of experts
// (Mixtral, Qwen3-MoE, DeepSeek-V3, Llama 4, gpt-oss, Grok-1), with grouped-query or multi-head
// latent attention (DeepSeek-V2/V3) and optional sliding-window / chunked attention.

#include <cstdint>
#include <string>

#include "model/json_io.h"

namespace parallax {

enum class MlpKind { kGelu, kSwiglu };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionKind { kLearned, kRotary };
//! Multi-head (grouped-query) attention, or DeepSeek-V2/V3's multi-head latent attention.
enum class AttentionKind { kMha, kMla };
//! Router scores: softmax over the experts (Mixtral, Qwen3, Llama 4, gpt-oss), or DeepSeek-V3's
//! sigmoid with group-limited selection (DeepSeek-V3 report, section 2.1.2).
enum class RouterKind { kSoftmax, kSigmoid };
//! A local-attention layer sees the last `attention_window` tokens (sliding, gpt-oss) or only its
//! own block of `attention_window` tokens (chunked, Llama 4).
enum class WindowKind { kSliding, kChunked };

struct ModelSpec {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;    //!< grouped-query attention; equals heads for multi-head attention
  int64_t vocab = 0;
  int64_t seq_len = 0;     //!< maximum (and default training) sequence length
  int64_t ffn_hidden = 0;  //!< MLP inner size (4*hidden for GELU by default)
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  bool tie_embeddings = true;  //!< LM head shares the token embedding
  bool bias = true;            //!< linear layers carry biases (GPT); LLaMA has none
  bool dropout = false;        //!< dropout masks stored (counts of Korthikanti et al. 2022)
  int64_t head_size = 0;       //!< JSON head_dim: per-head width when heads x head_dim != hidden; 0 = hidden / heads

  // Mixture of experts (Megatron-Core's --num-experts ... --moe-layer-freq); experts 0 = dense.
  int64_t experts = 0;            //!< routed experts per MoE layer
  int64_t experts_per_token = 0;  //!< top-k
  int64_t moe_ffn_hidden = 0;     //!< each expert's inner size
  int64_t shared_experts = 0;     //!< always-on experts of moe_ffn_hidden each
  int64_t dense_layers = 0;       //!< the first k layers are dense (ffn_hidden)
  int64_t moe_layer_freq = 1;     //!< after the dense ones, layer i is MoE when i % moe_layer_freq == 0
  RouterKind router = RouterKind::kSoftmax;
  int64_t router_groups = 1;      //!< sigmoid router: expert groups (DeepSeek-V3 n_group)
  int64_t router_group_topk = 1;  //!< groups a token may route into (topk_group)
  int64_t mtp_layers = 0;         //!< DeepSeek-V3 multi-token-prediction modules (not in params_total)

  // Multi-head latent attention (DeepSeek-V2 paper, section 2.1): kv_heads = heads.
  AttentionKind attention = AttentionKind::kMha;
  int64_t q_lora_rank = 0;  //!< 0: queries projected directly (no low-rank query compression)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  // Local attention: 0 = every layer attends over the whole sequence.
  int64_t attention_window = 0;  //!< tokens a local layer attends over
  WindowKind window_kind = WindowKind::kSliding;
  //! Layer i keeps full attention when (i + 1) % full_attention_every == 0 (gpt-oss 2, Llama 4 4);
  //! 0 = every layer local when attention_window > 0.
  int64_t full_attention_every = 0;

  bool operator==(const ModelSpec&) const = default;

  bool moe() const { return experts > 0; }
  bool mla() const { return attention == AttentionKind::kMla; }
  //! Query/key width per head (MLA: nope + rope part).
  int64_t head_dim() const {
    if (mla()) return qk_nope_head_dim + qk_rope_head_dim;
    return head_size > 0 ? head_size : hidden / heads;
  }
  //! Value (and attention output) width per head.
  int64_t value_dim() const { return mla() ? v_head_dim : head_dim(); }
  int64_t q_dim() const { return heads * head_dim(); }
  int64_t attn_out_dim() const { return heads * value_dim(); }
  int64_t kv_dim() const { return kv_heads * head_dim(); }
};

//! Whether layer `layer` (0-based) holds routed experts (Megatron-Core's moe_layer_freq pattern
//! after the first dense_layers).
bool IsMoeLayer(const ModelSpec& m, int64_t layer);
//! Number of MoE layers in the model.
int64_t MoeLayerCount(const ModelSpec& m);
//! Whether layer `layer` attends over a local window (sliding or chunked) rather than the whole sequence.
bool IsLocalAttentionLayer(const ModelSpec& m, int64_t layer);
//! Keys each query of a local layer sees, per sequence of `seq_len` (the full-square convention for
//! global layers: seq_len).
int64_t AttendedKeys(const ModelSpec& m, int64_t layer, int64_t seq_len);

//! Fills derived defaults (kv_heads, ffn_hidden) and checks every rule; `file` names the origin.
Status ValidateModel(const ModelSpec& m, const std::string& file = "model", const std::string& path = "");
//! Parses {"kind":"model",...}; unknown keys, wrong types and bad sizes are errors.
Result<ModelSpec> ModelFromJson(const Json& j, const std::string& file, const std::string& path = "");
Json ModelToJson(const ModelSpec& m);
//! Reads our model format, or a Hugging Face config.json (detected by "model_type"/"architectures").
Result<ModelSpec> LoadModelFile(const std::string& path);

const char* ToString(MlpKind k);
const char* ToString(NormKind k);
const char* ToString(PositionKind k);
const char* ToString(AttentionKind k);
const char* ToString(RouterKind k);
const char* ToString(WindowKind k);

}  // namespace parallax
