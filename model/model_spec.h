#pragma once
// ModelSpec: a GPT/LLaMA-style pre-norm decoder-only transformer.

#include <cstdint>
#include <string>

#include "model/json_io.h"

namespace parallax {

enum class MlpKind { kGelu, kSwiglu };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionKind { kLearned, kRotary };

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

  bool operator==(const ModelSpec&) const = default;

  int64_t head_dim() const { return hidden / heads; }
  int64_t kv_dim() const { return kv_heads * head_dim(); }
};

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

}  // namespace parallax
