#include "model/model_spec.h"

#include "model/hf_import.h"

namespace parallax {
namespace {

constexpr int64_t kModelVersion = 1;

// LLaMA's SwiGLU width: 2/3 of 4h, rounded up to a multiple of 256 (Touvron et al. 2023).
int64_t DefaultFfnHidden(const ModelSpec& m) {
  if (m.mlp == MlpKind::kGelu) return 4 * m.hidden;
  const int64_t raw = 8 * m.hidden / 3;
  return (raw + 255) / 256 * 256;
}

}  // namespace

const char* ToString(MlpKind k) { return k == MlpKind::kGelu ? "gelu" : "swiglu"; }
const char* ToString(NormKind k) { return k == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }
const char* ToString(PositionKind k) { return k == PositionKind::kLearned ? "learned" : "rotary"; }

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
  if (m.hidden % m.heads != 0) {
    return fail("heads", "heads=" + std::to_string(m.heads) + " does not divide hidden=" +
                             std::to_string(m.hidden));
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    return fail("kv_heads", "kv_heads=" + std::to_string(m.kv_heads) + " does not divide heads=" +
                                std::to_string(m.heads));
  }
  if (m.position == PositionKind::kRotary && m.head_dim() % 2 != 0) {
    return fail("heads", "rotary embeddings need an even head dimension (hidden/heads = " +
                             std::to_string(m.head_dim()) + ")");
  }
  return Status::Ok();
}

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
    r.Finish();
    if (m.ffn_hidden == 0) m.ffn_hidden = DefaultFfnHidden(m);
    PX_TRY(ValidateModel(m, file, path));
    return m;
  });
}

Json ModelToJson(const ModelSpec& m) {
  return Json{{"kind", "model"},
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
}

Result<ModelSpec> LoadModelFile(const std::string& path) {
  PX_ASSIGN(const Json j, LoadJsonFile(path));
  if (j.is_object() && !j.contains("kind")) return ModelFromHfConfig(j, path);
  return ModelFromJson(j, path);
}

}  // namespace parallax
