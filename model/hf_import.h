#pragma once
// Import of a Hugging Face transformers config.json (LLaMA, Mistral, GPT-2, GPT-NeoX field names).

#include <string>

#include "model/json_io.h"
#include "model/model_spec.h"

namespace parallax {

//! True when `j` looks like a Hugging Face config (has "model_type" or "architectures").
bool LooksLikeHfConfig(const Json& j);
//! Maps the known fields onto a ModelSpec; fields HF adds that do not change the shape are ignored.
Result<ModelSpec> ModelFromHfConfig(const Json& j, const std::string& file);

}  // namespace parallax
