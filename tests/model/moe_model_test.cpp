// Mixture-of-experts models: presets against their published totals and active counts, the model
// file's expert / MLA / local-attention fields, their errors, and what counting makes of them.
#include <gtest/gtest.h>

#include <string>

#include "model/counting.h"
#include "model/hf_import.h"
#include "model/model_spec.h"
#include "model/presets.h"

namespace parallax {
namespace {

ModelSpec Preset(const char* name) {
  auto m = ModelPreset(name);
  EXPECT_TRUE(m.has_value()) << name;
  return m ? *m : ModelSpec{};
}

double Total(const char* name) { return static_cast<double>(CountModel(Preset(name)).params_total); }
double Active(const char* name) { return static_cast<double>(CountModel(Preset(name)).params_active); }

TEST(MoePresets, TotalsMatchThePublishedParameterCounts) {
  // DeepSeek-V3 technical report (arXiv 2412.19437), abstract: 671B total, 37B activated per token.
  EXPECT_NEAR(Total("deepseek-v3"), 671e9, 0.01 * 671e9);
  // Qwen3 technical report (arXiv 2505.09388), table 2: Qwen3-235B-A22B 235B / 22B; Qwen3-30B-A3B 30B / 3B
  // (model cards: 235B / 22B, 30.5B / 3.3B).
  EXPECT_NEAR(Total("qwen3-235b-a22b"), 235e9, 0.01 * 235e9);
  EXPECT_NEAR(Total("qwen3-30b-a3b"), 30.5e9, 0.01 * 30.5e9);
  // Mixtral of Experts (Jiang et al. 2024, arXiv 2401.04088), section 2: 46.7B total, 12.9B active (13B).
  EXPECT_NEAR(Total("mixtral-8x7b"), 46.7e9, 0.01 * 46.7e9);
  // Llama 4 model card (meta-llama/Llama-4-Maverick-17B-128E): 400B total, 17B active (language model).
  EXPECT_NEAR(Total("llama4-maverick"), 400e9, 0.01 * 400e9);
  // xAI, "Open Release of Grok-1" (2024-03-17): 314B parameters.
  EXPECT_NEAR(Total("grok-1"), 314e9, 0.01 * 314e9);
  // gpt-oss-120b model card (OpenAI, arXiv 2508.10925), table 1: 116.83B total, 5.13B active.
  EXPECT_NEAR(Total("gpt-oss-120b"), 116.83e9, 0.01 * 116.83e9);
}

TEST(MoePresets, ActiveCountsMatchThePublishedOnes) {
  EXPECT_NEAR(Active("deepseek-v3"), 37e9, 0.03 * 37e9);  // report abstract
  EXPECT_NEAR(Active("qwen3-235b-a22b"), 22e9, 0.03 * 22e9);
  EXPECT_NEAR(Active("qwen3-30b-a3b"), 3.3e9, 0.03 * 3.3e9);  // model card
  EXPECT_NEAR(Active("mixtral-8x7b"), 12.9e9, 0.03 * 12.9e9);
  EXPECT_NEAR(Active("llama4-maverick"), 17e9, 0.03 * 17e9);
  // The gpt-oss card counts active parameters without the embedding table (its table 1: 5.13B).
  const ModelCounts oss = CountModel(Preset("gpt-oss-120b"));
  EXPECT_NEAR(static_cast<double>(oss.params_active - oss.params_embedding), 5.13e9, 0.03 * 5.13e9);
}

TEST(MoePresets, DeepSeekV3MtpModuleIsCountedApart) {
  // The released checkpoint holds 685B: 671B of the main model and 14B of the MTP module (DeepSeek-V3
  // README, "Model Weights"); the module's own weights without the shared embedding and head: ~11.5B.
  const ModelCounts c = CountModel(Preset("deepseek-v3"));
  EXPECT_GT(c.params_mtp, 11e9);
  EXPECT_LT(c.params_mtp, 12.5e9);
}

TEST(MoeModel, LayerPatternFollowsDenseLayersAndFrequency) {
  const ModelSpec ds = Preset("deepseek-v3");
  EXPECT_FALSE(IsMoeLayer(ds, 2));
  EXPECT_TRUE(IsMoeLayer(ds, 3));
  EXPECT_EQ(MoeLayerCount(ds), 58);
  const ModelSpec l4 = Preset("llama4-maverick");
  EXPECT_TRUE(IsMoeLayer(l4, 0));
  EXPECT_FALSE(IsMoeLayer(l4, 1));
  EXPECT_EQ(MoeLayerCount(l4), 24);
  EXPECT_TRUE(IsLocalAttentionLayer(l4, 0));
  EXPECT_FALSE(IsLocalAttentionLayer(l4, 3));
  const ModelSpec oss = Preset("gpt-oss-120b");
  EXPECT_TRUE(IsLocalAttentionLayer(oss, 0));
  EXPECT_FALSE(IsLocalAttentionLayer(oss, 1));
  EXPECT_EQ(AttendedKeys(oss, 0, 4096), 128);
  EXPECT_EQ(AttendedKeys(oss, 1, 4096), 4096);
}

TEST(MoeModel, ForwardFlopsCountActiveParametersAndTheAttendedKeys) {
  // Mixtral: every layer MoE, full attention: 2 x (active GEMM weights) + 4 s h per layer + 2 V h.
  const ModelSpec m = Preset("mixtral-8x7b");
  const double h = 4096, kv = 1024, f = 14336, s = m.seq_len, v = m.vocab, l = m.layers;
  const double per_layer = 2 * (h * (h + 2 * kv) + h * h) + 2 * h * 8 + 2 * 2 * 3 * h * f + 4 * s * h;
  const ModelCounts c = CountModel(m);
  EXPECT_NEAR(c.fwd_flops_per_token, l * per_layer + 2 * v * h, 1e-12 * c.fwd_flops_per_token);
  // gpt-oss: a 128-token window layer's attention core counts 128 keys, a full one s.
  const ModelSpec oss = Preset("gpt-oss-120b");
  const ModelCounts co = CountModel(oss);
  const double core_full = 4.0 * static_cast<double>(oss.seq_len) * 64 * 64;
  EXPECT_DOUBLE_EQ(co.layers[1].attn_core_flops_per_token, core_full);
  EXPECT_DOUBLE_EQ(co.layers[0].attn_core_flops_per_token, core_full * 128 / static_cast<double>(oss.seq_len));
}

TEST(MoeModel, MlaParametersFollowTheDeepSeekShapes) {
  // DeepSeek-V3 attention per layer: q_a 7168x1536, q_b 1536x(128x192), kv_a 7168x576, kv_b
  // 512x(128x256), o 16384x7168, and the two latent RMSNorms (1536 + 512).
  const ModelCounts c = CountModel(Preset("deepseek-v3"));
  const int64_t qkv = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 1536 + 512;
  ASSERT_EQ(c.layer_ops[1].name, "qkv");
  EXPECT_EQ(c.layer_ops[1].params, qkv);
  EXPECT_EQ(c.layer_ops[3].params, int64_t{128} * 128 * 7168);
  EXPECT_FALSE(c.layers[0].moe);
  EXPECT_TRUE(c.layers[3].moe);
  EXPECT_EQ(c.layers[3].params - c.layers[3].active_params, int64_t{248} * 3 * 7168 * 2048);
}

TEST(MoeModel, ExpertActivationsGrowWithTopKAndWithTheExpertTensorGroup) {
  ModelSpec m = Preset("mixtral-8x7b");
  ActivationOptions o;
  o.tp = 2;
  o.sequence_parallel = true;
  const int64_t two = MoeActivationBytes(m, o, 1);
  m.experts_per_token = 4;
  const int64_t four = MoeActivationBytes(m, o, 1);
  EXPECT_GT(four, 2 * two - 4 * m.experts * m.seq_len);  // routed part doubles; router scores stay
  // etp 2 splits the experts' inner width but its h-wide dispatch and combine buffers hold the tokens
  // of both etp ranks: more bytes in all.
  EXPECT_GT(MoeActivationBytes(m, o, 2), four);
  o.recompute = Recompute::kFull;
  EXPECT_EQ(MoeActivationBytes(m, o, 1), 0);
  // A dense first layer of DeepSeek-V3 keeps no expert activations.
  const ModelSpec ds = Preset("deepseek-v3");
  ActivationOptions d;
  EXPECT_LT(ActivationBytesOfLayer(ds, 0, d), ActivationBytesOfLayer(ds, 3, d));
}

Result<ModelSpec> Parse(const std::string& extra) {
  const Json j = Json::parse(R"({"kind":"model","version":1,"name":"m","layers":4,"hidden":256,"heads":4,
    "vocab":1000,"seq_len":128,"mlp":"swiglu")" + extra + "}");
  return ModelFromJson(j, "m.json");
}

TEST(MoeModel, BadValuesNameTheFileAndJsonPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"(,"experts":8,"experts_per_token":9,"moe_ffn_hidden":64)", "m.json: /experts_per_token: must be in 1..experts=8"},
      {R"(,"experts":8,"experts_per_token":2)", "m.json: /moe_ffn_hidden: must be > 0"},
      {R"(,"experts_per_token":2)", "m.json: /experts_per_token: needs experts > 0"},
      {R"(,"experts":8,"experts_per_token":2,"moe_ffn_hidden":64,"dense_layers":4)", "m.json: /dense_layers:"},
      {R"(,"experts":8,"experts_per_token":2,"moe_ffn_hidden":64,"router_groups":3)", "m.json: /router_groups:"},
      {R"(,"experts":-1)", "m.json: /experts:"},
      {R"(,"q_lora_rank":64)", "m.json: /q_lora_rank: needs attention \"mla\""},
      {R"(,"attention":"mla","kv_lora_rank":64,"qk_nope_head_dim":32,"qk_rope_head_dim":0,"v_head_dim":32)",
       "m.json: /qk_rope_head_dim: must be > 0"},
      {R"(,"attention":"gqa")", "m.json: /attention:"},
      {R"(,"window_kind":"blocky")", "m.json: /window_kind:"},
  };
  for (const auto& [extra, message] : cases) {
    auto m = Parse(extra);
    ASSERT_FALSE(m) << extra;
    EXPECT_EQ(m.error().kind, ErrorKind::kBadInput) << extra;
    EXPECT_NE(m.error().message.find(message), std::string::npos) << m.error().message;
  }
}

TEST(MoeModel, EveryFieldRoundTripsAndTakesPartInEquality) {
  for (const char* name : {"deepseek-v3", "llama4-maverick", "gpt-oss-120b", "qwen3-235b-a22b"}) {
    const ModelSpec m = Preset(name);
    auto back = ModelFromJson(ModelToJson(m), "x.json");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, m) << name;
  }
  ModelSpec a = Preset("deepseek-v3"), b = a;
  b.router_group_topk = 3;
  EXPECT_NE(a, b);  // the planner's cost cache keys on the whole spec
  b = a;
  b.mtp_layers = 0;
  EXPECT_NE(a, b);
  // A dense model's file gains no new key.
  EXPECT_FALSE(ModelToJson(Preset("llama3-8b")).contains("experts"));
}

TEST(MoeModel, ReadsTheValidationDataFieldNames) {
  // The model object of the DeepSeek-V3 GB200 row of the published-runs table (dgxc-benchmarking
  // v25.05.04 deepseek_v3/pretraining/README.md), as the table spells it.
  const Json j = Json::parse(R"({"kind":"model","version":1,"name":"DeepSeek-V3 671B","layers": 61, "hidden": 7168,
    "heads": 128, "vocab": 129280, "seq_len": 4096, "ffn_hidden": 18432, "experts": 256, "experts_per_token": 8,
    "moe_ffn_hidden": 2048, "shared_experts": 1, "dense_layers": 3, "attention": "mla", "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "mlp": "swiglu",
    "norm": "rmsnorm", "position": "rotary", "bias": false, "tie_embeddings": false})");
  auto m = ModelFromJson(j, "row.json");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_NEAR(static_cast<double>(CountModel(*m).params_total), 671e9, 0.01 * 671e9);
  EXPECT_EQ(m->kv_heads, 128);
}

ModelSpec Hf(const std::string& text) {
  auto m = ModelFromHfConfig(Json::parse(text), "config.json");
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  return m ? *m : ModelSpec{};
}

TEST(MoeHfImport, MixtralQwen3MoeAndGptOssMatchTheirPresets) {
  const ModelSpec mixtral = Hf(R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral","hidden_size":4096,
    "intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
    "num_local_experts":8,"num_experts_per_tok":2,"vocab_size":32000,"max_position_embeddings":32768,
    "hidden_act":"silu","rms_norm_eps":1e-05,"tie_word_embeddings":false})");
  EXPECT_EQ(CountModel(mixtral).params_total, CountModel(Preset("mixtral-8x7b")).params_total);
  const ModelSpec qwen = Hf(R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":4096,
    "intermediate_size":12288,"moe_intermediate_size":1536,"num_attention_heads":64,"num_key_value_heads":4,
    "head_dim":128,"num_hidden_layers":94,"num_experts":128,"num_experts_per_tok":8,"decoder_sparse_step":1,
    "mlp_only_layers":[],"vocab_size":151936,"max_position_embeddings":40960,"hidden_act":"silu",
    "rms_norm_eps":1e-06,"tie_word_embeddings":false})");
  EXPECT_EQ(qwen.head_size, 128);
  EXPECT_EQ(CountModel(qwen).params_total, CountModel(Preset("qwen3-235b-a22b")).params_total);
  const ModelSpec oss = Hf(R"({"architectures":["GptOssForCausalLM"],"model_type":"gpt_oss","hidden_size":2880,
    "intermediate_size":2880,"num_attention_heads":64,"num_key_value_heads":8,"head_dim":64,"num_hidden_layers":36,
    "num_local_experts":128,"experts_per_token":4,"vocab_size":201088,"max_position_embeddings":131072,
    "sliding_window":128,"attention_bias":true,"hidden_act":"silu","rms_norm_eps":1e-05,"tie_word_embeddings":false,
    "layer_types":["sliding_attention","full_attention","sliding_attention","full_attention","sliding_attention",
    "full_attention","sliding_attention","full_attention","sliding_attention","full_attention","sliding_attention",
    "full_attention","sliding_attention","full_attention","sliding_attention","full_attention","sliding_attention",
    "full_attention","sliding_attention","full_attention","sliding_attention","full_attention","sliding_attention",
    "full_attention","sliding_attention","full_attention","sliding_attention","full_attention","sliding_attention",
    "full_attention","sliding_attention","full_attention","sliding_attention","full_attention","sliding_attention",
    "full_attention"]})");
  EXPECT_EQ(oss.attention_window, 128);
  EXPECT_EQ(oss.full_attention_every, 2);
  EXPECT_EQ(CountModel(oss).params_total, CountModel(Preset("gpt-oss-120b")).params_total);
}

TEST(MoeHfImport, DeepSeekV3AndLlama4ReadTheirOwnFieldNames) {
  const ModelSpec ds = Hf(R"({"architectures":["DeepseekV3ForCausalLM"],"model_type":"deepseek_v3","hidden_size":7168,
    "intermediate_size":18432,"moe_intermediate_size":2048,"num_attention_heads":128,"num_key_value_heads":128,
    "num_hidden_layers":61,"n_routed_experts":256,"n_shared_experts":1,"num_experts_per_tok":8,
    "first_k_dense_replace":3,"moe_layer_freq":1,"n_group":8,"topk_group":4,"scoring_func":"sigmoid",
    "q_lora_rank":1536,"kv_lora_rank":512,"qk_nope_head_dim":128,"qk_rope_head_dim":64,"v_head_dim":128,
    "num_nextn_predict_layers":1,"vocab_size":129280,"max_position_embeddings":163840,"hidden_act":"silu",
    "rms_norm_eps":1e-06,"tie_word_embeddings":false})");
  EXPECT_TRUE(ds.mla());
  EXPECT_EQ(ds.router, RouterKind::kSigmoid);
  EXPECT_EQ(ds.mtp_layers, 1);
  EXPECT_EQ(CountModel(ds).params_total, CountModel(Preset("deepseek-v3")).params_total);
  // Llama 4's multimodal config: the language model under text_config; interleave_moe_layer_step
  // becomes moe_layer_freq.
  const ModelSpec l4 = Hf(R"({"architectures":["Llama4ForConditionalGeneration"],"model_type":"llama4",
    "text_config":{"model_type":"llama4_text","hidden_size":5120,"intermediate_size":8192,"intermediate_size_mlp":16384,
    "num_attention_heads":40,"num_key_value_heads":8,"head_dim":128,"num_hidden_layers":48,"num_local_experts":128,
    "num_experts_per_tok":1,"interleave_moe_layer_step":2,"attention_chunk_size":8192,"vocab_size":202048,
    "max_position_embeddings":1048576,"hidden_act":"silu","rms_norm_eps":1e-05,"tie_word_embeddings":false}})");
  EXPECT_EQ(l4.moe_layer_freq, 2);
  EXPECT_EQ(l4.shared_experts, 1);
  EXPECT_EQ(l4.window_kind, WindowKind::kChunked);
  EXPECT_EQ(CountModel(l4).params_total, CountModel(Preset("llama4-maverick")).params_total);
}

}  // namespace
}  // namespace parallax
