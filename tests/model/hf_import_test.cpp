// Hugging Face config.json import for the four families' field names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/counting.h"
#include "model/hf_import.h"
#include "model/presets.h"

namespace parallax {
namespace {

ModelSpec Import(const char* text) {
  auto j = Json::parse(text);
  EXPECT_TRUE(LooksLikeHfConfig(j));
  auto m = ModelFromHfConfig(j, "config.json");
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  return m ? *m : ModelSpec{};
}

TEST(HfImport, Llama2_7bMatchesPreset) {
  const ModelSpec m = Import(R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":4096,
    "intermediate_size":11008,"num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":32,
    "vocab_size":32000,"max_position_embeddings":4096,"hidden_act":"silu","rms_norm_eps":1e-05,
    "tie_word_embeddings":false,"torch_dtype":"float16","rope_theta":10000.0,"_name_or_path":"meta-llama/Llama-2-7b-hf"})");
  EXPECT_EQ(m.name, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(m.mlp, MlpKind::kSwiglu);
  EXPECT_EQ(m.norm, NormKind::kRmsNorm);
  EXPECT_EQ(m.seq_len, 4096);
  EXPECT_EQ(CountModel(m).params_total, CountModel(*ModelPreset("llama-7b")).params_total);
}

TEST(HfImport, Llama3_8bWithGqa) {
  const ModelSpec m = Import(R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":4096,
    "intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
    "vocab_size":128256,"max_position_embeddings":8192,"hidden_act":"silu","rms_norm_eps":1e-05,
    "rope_theta":500000.0,"tie_word_embeddings":false})");
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_NEAR(static_cast<double>(CountModel(m).params_total), 8.03e9, 0.005 * 8.03e9);
}

TEST(HfImport, Mistral7b) {
  const ModelSpec m = Import(R"({"architectures":["MistralForCausalLM"],"model_type":"mistral","hidden_size":4096,
    "intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
    "vocab_size":32000,"max_position_embeddings":32768,"sliding_window":4096,"hidden_act":"silu","rms_norm_eps":1e-05})");
  EXPECT_NEAR(static_cast<double>(CountModel(m).params_total), 7.24e9, 0.005 * 7.24e9);
}

TEST(HfImport, Gpt2UsesItsOwnFieldNames) {
  const ModelSpec m = Import(R"({"architectures":["GPT2LMHeadModel"],"model_type":"gpt2","n_embd":768,"n_layer":12,
    "n_head":12,"n_positions":1024,"n_ctx":1024,"vocab_size":50257,"n_inner":null,"activation_function":"gelu_new",
    "layer_norm_epsilon":1e-05})");
  EXPECT_EQ(m.hidden, 768);
  EXPECT_EQ(m.ffn_hidden, 3072);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_EQ(m.position, PositionKind::kLearned);
  EXPECT_NEAR(static_cast<double>(CountModel(m).params_total), 124.4e6, 0.005 * 124.4e6);  // GPT-2 small
}

TEST(HfImport, GptNeoX) {
  // Pythia-1.4B (EleutherAI): 24 layers, 2048 hidden, 16 heads, untied head.
  const ModelSpec m = Import(R"({"architectures":["GPTNeoXForCausalLM"],"model_type":"gpt_neox","hidden_size":2048,
    "intermediate_size":8192,"num_attention_heads":16,"num_hidden_layers":24,"vocab_size":50304,
    "max_position_embeddings":2048,"hidden_act":"gelu","rotary_pct":0.25,"use_parallel_residual":true,
    "layer_norm_eps":1e-05,"tie_word_embeddings":false})");
  EXPECT_EQ(m.mlp, MlpKind::kGelu);
  EXPECT_EQ(m.norm, NormKind::kLayerNorm);
  EXPECT_TRUE(m.bias);
  EXPECT_NEAR(static_cast<double>(CountModel(m).params_total), 1.414e9, 0.005 * 1.414e9);
}

TEST(HfImport, HeadsNotDividingHiddenIsRejected) {
  auto m = ModelFromHfConfig(Json::parse(R"({"model_type":"llama","hidden_size":100,"num_hidden_layers":2,
    "num_attention_heads":3,"vocab_size":10,"max_position_embeddings":8})"), "cfg/config.json");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("cfg/config.json: /heads: heads=3 does not divide hidden=100"), std::string::npos)
      << m.error().message;
}

// A config.json without model_type or architectures (a model file without "kind") is neither
// format: the message says what each would need instead of "/kind: missing required field".
TEST(HfImport, AFileThatIsNeitherFormatSaysWhatWouldMakeItOne) {
  auto m = ModelFromHfConfig(Json::parse(R"({"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
    "vocab_size":10,"max_position_embeddings":8})"), "cfg/config.json");
  ASSERT_FALSE(m);
  const std::string& e = m.error().message;
  EXPECT_EQ(e.rfind("cfg/config.json: neither a parallax model file nor a recognised Hugging Face config.json", 0), 0u)
      << e;
  EXPECT_NE(e.find("\"kind\": \"model\""), std::string::npos) << e;
  EXPECT_NE(e.find("\"model_type\" (llama, mistral, gpt2, gpt_neox, qwen3, mixtral, qwen3_moe, deepseek_v3, llama4, "
                    "llama4_text, gpt_oss)"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("missing required field"), std::string::npos) << e;
}

// Qwen2 has LLaMA's field names but not its layout (biased q/k/v): refused by name, never read
// silently as LLaMA.
TEST(HfImport, AModelTypeNotReadIsRefusedNamingTheOnesThatAre) {
  auto m = ModelFromHfConfig(Json::parse(R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2",
    "hidden_size":896,"intermediate_size":4864,"num_attention_heads":14,"num_hidden_layers":24,
    "num_key_value_heads":2,"vocab_size":151936,"max_position_embeddings":32768,"hidden_act":"silu"})"),
                             "qwen/config.json");
  ASSERT_FALSE(m);
  const std::string& e = m.error().message;
  EXPECT_NE(e.find("qwen/config.json: /model_type: \"qwen2\" is not a model_type parallax reads"), std::string::npos)
      << e;
  EXPECT_NE(e.find("llama, mistral, gpt2, gpt_neox, qwen3, mixtral"), std::string::npos) << e;
  EXPECT_EQ(HfModelTypes(), (std::vector<std::string>{"llama", "mistral", "gpt2", "gpt_neox", "qwen3", "mixtral",
                                                      "qwen3_moe", "deepseek_v3", "llama4", "llama4_text", "gpt_oss"}));
}

// Without model_type, the architecture class names the family (and an unknown one is refused).
TEST(HfImport, ArchitecturesNameTheFamilyWithoutModelType) {
  const ModelSpec m = Import(R"({"architectures":["GPT2LMHeadModel"],"n_embd":64,"n_layer":2,"n_head":4,
    "n_positions":32,"vocab_size":256})");
  EXPECT_EQ(m.position, PositionKind::kLearned);
  EXPECT_EQ(m.norm, NormKind::kLayerNorm);
  auto other = ModelFromHfConfig(Json::parse(R"({"architectures":["FalconForCausalLM"],"hidden_size":64})"), "c.json");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("c.json: /architectures: [\"FalconForCausalLM\"] names no architecture"),
            std::string::npos)
      << other.error().message;
}

}  // namespace
}  // namespace parallax
