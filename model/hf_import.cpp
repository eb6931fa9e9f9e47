#include "model/hf_import.h"

#include <filesystem>

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

}  // namespace

bool LooksLikeHfConfig(const Json& j) {
  return j.is_object() && (j.contains("model_type") || j.contains("architectures"));
}

Result<ModelSpec> ModelFromHfConfig(const Json& j, const std::string& file) {
  return CatchJsonErrors([&]() -> Result<ModelSpec> {
    ObjectReader r(j, file, "");
    ModelSpec m;
    const std::string type = r.Has("model_type") ? r.String("model_type") : "";
    m.name = r.Has("_name_or_path") && r.Raw("_name_or_path").is_string() &&
                     !r.Raw("_name_or_path").get<std::string>().empty()
                 ? r.Raw("_name_or_path").get<std::string>()
                 : std::filesystem::path(file).parent_path().filename().string();
    if (m.name.empty()) m.name = type.empty() ? "hf-model" : type;

    const bool gpt2 = type == "gpt2" || r.Has("n_embd");
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
      if (r.Has("head_dim") && !r.Raw("head_dim").is_null()) {
        const int64_t hd = r.PositiveInt("head_dim");
        if (hd * m.heads != m.hidden) {
          r.Fail("head_dim", "head_dim*num_attention_heads != hidden_size is not supported");
        }
      }
    }
    // Every other field of a HF config (dtype, token ids, rope scaling...) does not change
    // the parameter or FLOP count and is ignored on purpose.
    if (Status s = ValidateModel(m, file); !s) return s.error();
    return m;
  });
}

}  // namespace parallax
