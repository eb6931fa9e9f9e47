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
                                  {"gpt_neox", "GPTNeoXForCausalLM"}};

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
    ObjectReader r(j, file, "");
    ModelSpec m;
    const std::string type = FamilyOf(r);
    m.name = r.Has("_name_or_path") && r.Raw("_name_or_path").is_string() &&
                     !r.Raw("_name_or_path").get<std::string>().empty()
                 ? r.Raw("_name_or_path").get<std::string>()
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
      if (r.Has("head_dim") && !r.Raw("head_dim").is_null()) {
        const int64_t hd = r.PositiveInt("head_dim");
        if (hd * m.heads != m.hidden) {
          r.Fail("head_dim", "head_dim*num_attention_heads != hidden_size is not supported");
        }
      }
    }
    // Every other field of a HF config (dtype, token ids, rope scaling...) does not change
    // the parameter or FLOP count and is ignored on purpose.
    PX_TRY(ValidateModel(m, file));
    return m;
  });
}

}  // namespace parallax
