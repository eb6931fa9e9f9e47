#pragma once
// Import of a Hugging Face transformers config.json (LLaMA, Mistral, GPT-2, GPT-NeoX, Qwen3, and the
// mixtures of experts Mixtral, Qwen3-MoE, DeepSeek-V3, Llama 4 and gpt-oss field names).
// Other families are refused by name rather than read with another family's field names.

#include <string>
#include <vector>

#include "model/json_io.h"
#include "model/model_spec.h"

namespace parallax {

//! True when `j` looks like a Hugging Face config (has "model_type" or "architectures").
bool LooksLikeHfConfig(const Json& j);
//! The model_types read, each with its family's field names: llama, mistral, gpt2, gpt_neox, qwen3,
//! mixtral, qwen3_moe, deepseek_v3, llama4 (its text_config), llama4_text, gpt_oss.
std::vector<std::string> HfModelTypes();
//! Maps the known fields of a model file without "kind" onto a ModelSpec; fields HF adds that do
//! not change the shape are ignored. Bad input: a file that is no Hugging Face config (saying what
//! would make it ours or one), a model_type or architecture not among HfModelTypes().
Result<ModelSpec> ModelFromHfConfig(const Json& j, const std::string& file);

}  // namespace parallax
