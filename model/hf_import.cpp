#include "model/hf_import.h"

#include <filesystem>
#include <string_view>

namespace parallax {
namespace {

// Reads a positive integer from the first of `keys` present; fails naming the first key.
int64_t FirstInt(ObjectReader& r, std::initializer_list<std::string_view> keys, int64_t fallback = -1) {
  for (auto k : keys) {
    if (r.Has(k) && !r.Raw(k).is_null()) return r.PositiveInt(k);
  }
  if (fallback >= 0) return fallback;
  r.Fail(*keys.begin(), "missing required field");
}

//! A family read: its model_type and the architecture class transformers names it by.
struct HfFamily {
  std::string_view model_type;
  std::string_view architecture;
};
constexpr HfFamily kFamilies[] = {{"llama", "LlamaForCausalLM"},
                                  {"mistral", "MistralForCausalLM"},
                                  {"gpt2", "GPT2LMHeadModel"},
                                  {"gpt_neox", "GPTNeoXForCausalLM"},
                                  {"qwen3", "Qwen3ForCausalLM"},
                                  {"mixtral", "MixtralForCausalLM"},
                                  {"qwen3_moe", "Qwen3MoeForCausalLM"},
                                  {"deepseek_v3", "DeepseekV3ForCausalLM"},
                                  {"llama4", "Llama4ForConditionalGeneration"},
                                  {"llama4_text", "Llama4ForCausalLM"},
                                  {"gpt_oss", "GptOssForCausalLM"}};

std::string Listed() {
  std::string out;
  for (const HfFamily& f : kFamilies) out += (out.empty() ? "" : ", ") + std::string(f.model_type);
  return out;
}

//! The family's model_type: "model_type" when given, else the first known "architectures" entry.
std::string FamilyOf(ObjectReader& r) {
  const std::string advice = " (parallax reads " + Listed() +
                             "; a config with LLaMA's field names and layout can say \"model_type\": \"llama\")";
  if (r.Has("model_type")) {
    std::string type = r.String("model_type");
    for (const HfFamily& f : kFamilies) {
      if (f.model_type == type) return type;
    }
    r.Fail("model_type", "\"" + type + "\" is not a model_type parallax reads" + advice);
  }
  const Json& archs = r.Raw("architectures");
  if (archs.is_array()) {
    for (const Json& a : archs) {
      for (const HfFamily& f : kFamilies) {
        if (a.is_string() && a.get<std::string>() == f.architecture) return std::string(f.model_type);
      }
    }
  }
  r.Fail("architectures", archs.dump() + " names no architecture parallax reads" + advice);
}

int64_t IntOr(ObjectReader& r, std::string_view key, int64_t fallback) {
  return r.Has(key) && !r.Raw(key).is_null() ? r.NonNegativeInt(key, fallback) : fallback;
}

// Multi-head latent attention and the sigmoid group-limited router (DeepseekV3Config field names).
void ReadDeepseek(ObjectReader& r, ModelSpec& m) {
  m.attention = AttentionKind::kMla;
  m.kv_heads = m.heads;
  m.q_lora_rank = IntOr(r, "q_lora_rank", 0);
  m.kv_lora_rank = FirstInt(r, {"kv_lora_rank"});
  m.qk_nope_head_dim = FirstInt(r, {"qk_nope_head_dim"});
  m.qk_rope_head_dim = FirstInt(r, {"qk_rope_head_dim"});
  m.v_head_dim = FirstInt(r, {"v_head_dim"});
  m.experts = FirstInt(r, {"n_routed_experts"});
  m.moe_ffn_hidden = FirstInt(r, {"moe_intermediate_size"});
  m.shared_experts = IntOr(r, "n_shared_experts", 0);
  m.dense_layers = IntOr(r, "first_k_dense_replace", 0);
  m.moe_layer_freq = FirstInt(r, {"moe_layer_freq"}, 1);
  if (r.Has("scoring_func") && r.String("scoring_func") == "sigmoid") m.router = RouterKind::kSigmoid;
  m.router_groups = FirstInt(r, {"n_group"}, 1);
  m.router_group_topk = FirstInt(r, {"topk_group"}, 1);
  m.mtp_layers = IntOr(r, "num_nextn_predict_layers", 0);
}

// Layer types of gpt-oss ("sliding_attention" / "full_attention"): the pattern must be one full
// layer every k (layer i full when (i + 1) % k == 0), which is what the published models use.
void ReadLayerTypes(ObjectReader& r, ModelSpec& m) {
  const Json& types = r.Raw("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != m.layers) {
    r.Fail("layer_types", "expected one entry per layer (" + std::to_string(m.layers) + ")");
  }
  int64_t every = 0;
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] == "full_attention") {
      every = static_cast<int64_t>(i) + 1;
      break;
    }
  }
  m.full_attention_every = every;
  for (int64_t i = 0; i < m.layers; ++i) {
    const bool full = types[static_cast<size_t>(i)] == "full_attention";
    if (full == IsLocalAttentionLayer(m, i)) {
      r.Fail("layer_types", "layer " + std::to_string(i) +
                                ": parallax prices one full-attention layer every k (layer i full when (i+1) % k == 0)");
    }
  }
}

//! The families' expert fields: Mixtral and gpt-oss (num_local_experts, intermediate_size per expert),
//! Qwen3-MoE (num_experts, moe_intermediate_size, decoder_sparse_step), DeepSeek-V3, Llama 4
//! (num_local_experts, intermediate_size per expert and intermediate_size_mlp dense, one shared expert,
//! interleave_moe_layer_step; chunked attention of attention_chunk_size on all but every 4th layer).
void ReadMoe(ObjectReader& r, const std::string& type, ModelSpec& m) {
  if (type == "mixtral" || type == "gpt_oss") {
    m.experts = FirstInt(r, {"num_local_experts"});
    m.moe_ffn_hidden = m.ffn_hidden;
  } else if (type == "qwen3_moe") {
    m.experts = FirstInt(r, {"num_experts"});
    m.moe_ffn_hidden = FirstInt(r, {"moe_intermediate_size"});
    m.moe_layer_freq = FirstInt(r, {"decoder_sparse_step"}, 1);
    if (r.Has("mlp_only_layers") && r.Raw("mlp_only_layers").is_array() && !r.Raw("mlp_only_layers").empty()) {
      r.Fail("mlp_only_layers", "dense layers at arbitrary places are not read (use dense_layers / moe_layer_freq)");
    }
  } else if (type == "deepseek_v3") {
    ReadDeepseek(r, m);
  } else if (type == "llama4" || type == "llama4_text") {
    m.experts = FirstInt(r, {"num_local_experts"});
    m.moe_ffn_hidden = m.ffn_hidden;
    m.ffn_hidden = FirstInt(r, {"intermediate_size_mlp"}, m.ffn_hidden);
    m.shared_experts = 1;
    m.moe_layer_freq = FirstInt(r, {"interleave_moe_layer_step"}, 1);
    if (r.Has("attention_chunk_size") && !r.Raw("attention_chunk_size").is_null()) {
      m.attention_window = r.PositiveInt("attention_chunk_size");
      m.window_kind = WindowKind::kChunked;
      m.full_attention_every = FirstInt(r, {"no_rope_layer_interval"}, 4);
    }
  }
  if (type == "gpt_oss" && r.Has("sliding_window") && !r.Raw("sliding_window").is_null()) {
    m.attention_window = r.PositiveInt("sliding_window");
    m.window_kind = WindowKind::kSliding;
    if (r.Has("layer_types")) ReadLayerTypes(r, m);
  }
  if (m.experts > 0) m.experts_per_token = FirstInt(r, {"num_experts_per_tok", "experts_per_token"});
}

}  // namespace

std::vector<std::string> HfModelTypes() {
  std::vector<std::string> out;
  for (const HfFamily& f : kFamilies) out.emplace_back(f.model_type);
  return out;
}

bool LooksLikeHfConfig(const Json& j) {
  return j.is_object() && (j.contains("model_type") || j.contains("architectures"));
}

Result<ModelSpec> ModelFromHfConfig(const Json& j, const std::string& file) {
  if (!LooksLikeHfConfig(j)) {
    return BadInput(file + ": neither a parallax model file nor a recognised Hugging Face config.json: ours "
                    "begins {\"kind\": \"model\", \"version\": 1, ...} (examples/model-gpt-350m.json), a Hugging "
                    "Face config names its family in \"model_type\" (" + Listed() + ") or \"architectures\"");
  }
  return CatchJsonErrors([&]() -> Result<ModelSpec> {
    ObjectReader top(j, file, "");
    const std::string type = FamilyOf(top);
    // Llama 4's multimodal config keeps the language model's fields under "text_config".
    const bool nested = type == "llama4" && j.contains("text_config");
    ObjectReader r = nested ? top.Object("text_config") : top;
    ModelSpec m;
    m.name = top.Has("_name_or_path") && top.Raw("_name_or_path").is_string() &&
                     !top.Raw("_name_or_path").get<std::string>().empty()
                 ? top.Raw("_name_or_path").get<std::string>()
                 : std::filesystem::path(file).parent_path().filename().string();
    if (m.name.empty()) m.name = type;

    const bool gpt2 = type == "gpt2";
    if (gpt2) {
      m.hidden = FirstInt(r, {"n_embd"});
      m.layers = FirstInt(r, {"n_layer"});
      m.heads = FirstInt(r, {"n_head"});
      m.kv_heads = m.heads;
      m.seq_len = FirstInt(r, {"n_positions", "n_ctx"});
      m.vocab = FirstInt(r, {"vocab_size"});
      m.ffn_hidden = FirstInt(r, {"n_inner"}, 4 * m.hidden);
      m.mlp = MlpKind::kGelu;
      m.norm = NormKind::kLayerNorm;
      m.position = PositionKind::kLearned;
      m.tie_embeddings = r.Bool("tie_word_embeddings", true);
      m.bias = true;
    } else {
      m.hidden = FirstInt(r, {"hidden_size"});
      m.layers = FirstInt(r, {"num_hidden_layers"});
      m.heads = FirstInt(r, {"num_attention_heads"});
      m.kv_heads = FirstInt(r, {"num_key_value_heads"}, m.heads);
      m.vocab = FirstInt(r, {"vocab_size"});
      m.seq_len = FirstInt(r, {"max_position_embeddings", "max_sequence_length"});
      m.ffn_hidden = FirstInt(r, {"intermediate_size"}, 4 * m.hidden);
      const std::string act = r.Has("hidden_act") ? r.String("hidden_act") : "silu";
      const bool swiglu = act == "silu" || act == "swish" || act == "swiglu";
      if (!swiglu && act.rfind("gelu", 0) != 0) r.Fail("hidden_act", "unsupported activation \"" + act + "\"");
      m.mlp = swiglu ? MlpKind::kSwiglu : MlpKind::kGelu;
      const bool neox = type == "gpt_neox";
      m.norm = (neox || r.Has("layer_norm_eps")) && !r.Has("rms_norm_eps") ? NormKind::kLayerNorm
                                                                            : NormKind::kRmsNorm;
      m.position = PositionKind::kRotary;
      m.tie_embeddings = r.Bool("tie_word_embeddings", false);
      m.bias = neox || r.Bool("attention_bias", false);
      if (type == "deepseek_v3") m.position = PositionKind::kRotary;
      if (r.Has("head_dim") && !r.Raw("head_dim").is_null() && type != "deepseek_v3") {
        const int64_t hd = r.PositiveInt("head_dim");
        if (hd * m.heads != m.hidden) m.head_size = hd;  // Qwen3, gpt-oss
      }
      ReadMoe(r, type, m);
    }
    // Every other field of a HF config (dtype, token ids, rope scaling...) does not change
    // the parameter or FLOP count and is ignored on purpose.
    PX_TRY(ValidateModel(m, file));
    return m;
  });
}

}  // namespace parallax
