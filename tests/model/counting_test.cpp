// Parameter, FLOP and activation counts against published figures.
#include <gtest/gtest.h>

#include <optional>
#include <ostream>

#include "model/counting.h"
#include "model/implementation.h"
#include "model/op_catalogue.h"
#include "model/presets.h"

namespace parallax {
namespace {

ModelSpec Preset(const char* name) {
  auto m = ModelPreset(name);
  EXPECT_TRUE(m.has_value()) << name;
  return *m;
}

double Params(const char* name) { return static_cast<double>(CountModel(Preset(name)).params_total); }

TEST(Counting, PublishedParameterCounts) {
  // GPT-3 175B (Brown et al. 2020) with vocab 51200: 174.6e9.
  EXPECT_NEAR(Params("gpt3-175b"), 174.6e9, 0.005 * 174.6e9);
  // LLaMA-7B 6.74e9 (Touvron et al. 2023); Llama-2-70B 68.98e9; Llama-3-8B 8.03e9 (HF model cards).
  EXPECT_NEAR(Params("llama-7b"), 6.74e9, 0.005 * 6.74e9);
  EXPECT_NEAR(Params("llama2-70b"), 68.98e9, 0.005 * 68.98e9);
  EXPECT_NEAR(Params("llama3-8b"), 8.03e9, 0.005 * 8.03e9);
  EXPECT_NEAR(Params("llama3-70b"), 70.55e9, 0.005 * 70.55e9);
  EXPECT_NEAR(Params("llama3-405b"), 405.8e9, 0.005 * 405.8e9);
  EXPECT_NEAR(Params("llama-13b"), 13.0e9, 0.01 * 13.0e9);
  EXPECT_NEAR(Params("llama-65b"), 65.2e9, 0.01 * 65.2e9);
}

TEST(Counting, Gpt3ClosedForm) {
  // 12 l h^2 + 13 l h + V h + s h for a GPT with biases, LayerNorm, learned positions, tied head.
  const ModelSpec m = Preset("gpt3-175b");
  const double l = 96, h = 12288, v = 51200, s = 2048;
  EXPECT_DOUBLE_EQ(static_cast<double>(CountModel(m).params_total), 12 * l * h * h + 13 * l * h + v * h + s * h + 2 * h);
}

TEST(Counting, MegatronFlopsFormula) {
  // Narayanan et al. SC'21: FLOPs per iteration with full recompute = 96 B s l h^2 (1 + s/6h + V/16lh).
  for (const char* name : {"megatron-1.7b", "megatron-145.6b", "gpt3-175b"}) {
    const ModelSpec m = Preset(name);
    const double l = m.layers, h = m.hidden, s = m.seq_len, v = m.vocab;
    const double per_token = 96 * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
    EXPECT_NEAR(TrainingFlopsPerToken(m, 0, Recompute::kFull), per_token, 1e-9 * per_token) << name;
    // Without recompute: 72 l h^2 (1 + s/6h) + 6 h V.
    const double no_rc = 72 * l * h * h * (1 + s / (6 * h)) + 6 * h * v;
    EXPECT_NEAR(TrainingFlopsPerToken(m, 0, Recompute::kNone), no_rc, 1e-9 * no_rc) << name;
  }
}

TEST(Counting, SixNRuleOfThumbForLlama) {
  // Training FLOPs/token ~ 6N + attention term; within 10% of 6N at seq 2048 for LLaMA-7B.
  const ModelSpec m = Preset("llama-7b");
  const double six_n = 6.0 * static_cast<double>(CountModel(m).params_total);
  EXPECT_NEAR(TrainingFlopsPerToken(m, 0, Recompute::kNone), six_n, 0.1 * six_n);
}

TEST(Counting, SwigluAndGqaShapes) {
  const ModelSpec m = Preset("llama2-70b");
  const ModelCounts c = CountModel(m);
  const double h = 8192, kv = 1024, f = 28672;
  EXPECT_EQ(c.params_per_layer, static_cast<int64_t>(h * (h + 2 * kv) + h * h + 3 * h * f + 2 * h));
  ASSERT_EQ(c.layer_ops[1].name, "qkv");
  EXPECT_DOUBLE_EQ(c.layer_ops[1].fwd_flops_per_token, 2 * h * (h + 2 * kv));
  ASSERT_EQ(c.layer_ops[5].name, "fc1");
  EXPECT_DOUBLE_EQ(c.layer_ops[5].fwd_flops_per_token, 2 * h * 2 * f);
}

// Korthikanti et al. 2022, table 2, for a 16-bit GPT with dropout (Megatron models).
struct ActCase {
  int64_t tp;
  bool sp;
  Recompute rc;
};
// ctest lists the case by this, not by its bytes.
void PrintTo(const ActCase& c, std::ostream* os) { *os << "tp=" << c.tp << " sp=" << c.sp << " " << ToString(c.rc); }

class Korthikanti : public ::testing::TestWithParam<ActCase> {};

TEST_P(Korthikanti, MatchesPaperFormula) {
  const ModelSpec m = Preset("megatron-18.4b");
  const ActCase c = GetParam();
  const double s = 2048, b = 2, h = m.hidden, a = m.heads, t = static_cast<double>(c.tp);
  ActivationOptions o;
  o.micro_batch = 2;
  o.tp = c.tp;
  o.sequence_parallel = c.sp;
  o.recompute = c.rc;
  double expect = 0;
  const double sbh = s * b * h;
  if (c.rc == Recompute::kFull) expect = c.sp ? 2 * sbh / t : 2 * sbh;
  else if (c.rc == Recompute::kSelective) expect = c.sp ? 34 * sbh / t : sbh * (10 + 24 / t);
  else expect = c.sp ? sbh / t * (34 + 5 * a * s / h) : sbh * (10 + 24 / t + 5 * a * s / (h * t));
  // Plus what the paper leaves out: two fp32 statistics per token for each of the two norms.
  if (c.rc != Recompute::kFull) expect += c.sp ? 16 * s * b / t : 16 * s * b;
  EXPECT_NEAR(static_cast<double>(ActivationBytesPerLayer(m, o)), expect, 1e-9 * expect);
}

INSTANTIATE_TEST_SUITE_P(Table2, Korthikanti,
                         ::testing::Values(ActCase{1, false, Recompute::kNone}, ActCase{8, false, Recompute::kNone},
                                           ActCase{8, true, Recompute::kNone}, ActCase{4, false, Recompute::kSelective},
                                           ActCase{4, true, Recompute::kSelective}, ActCase{8, false, Recompute::kFull},
                                           ActCase{8, true, Recompute::kFull}));

TEST(Counting, ActivationsShrinkWithRecomputeAndSp) {
  const ModelSpec m = Preset("llama3-8b");
  ActivationOptions o;
  o.tp = 4;
  int64_t prev = INT64_MAX;
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    o.recompute = r;
    o.sequence_parallel = false;
    const int64_t no_sp = ActivationBytesPerLayer(m, o);
    o.sequence_parallel = true;
    const int64_t sp = ActivationBytesPerLayer(m, o);
    EXPECT_LT(sp, no_sp);
    EXPECT_LT(no_sp, prev);
    prev = no_sp;
  }
  // fp32 doubles the element bytes of every tensor (no dropout masks in LLaMA); the norms' fp32
  // statistics (16 bytes a token) stay as they are.
  o.recompute = Recompute::kSelective;
  o.sequence_parallel = false;
  const int64_t stats = 16 * m.seq_len;
  const int64_t half = ActivationBytesPerLayer(m, o);
  o.bytes_per_element = 4;
  EXPECT_EQ(ActivationBytesPerLayer(m, o) - stats, 2 * (half - stats));
}

// What the implementation keeps: our executor applies no dropout (no masks, whatever the model
// says); a flash-attention profile keeps a 4-byte log-sum-exp per query row instead of the s x s
// probabilities and their dropout; Megatron-2021 keeps Korthikanti's full count.
TEST(Counting, ActivationsFollowTheImplementation) {
  const ModelSpec m = Preset("megatron-1.7b");
  ASSERT_TRUE(m.dropout);
  ActivationOptions base;
  base.micro_batch = 1;
  const int64_t s = m.seq_len, sbh = s * m.hidden, as2b = m.heads * s * s;
  const int64_t m2021 = ActivationBytesPerLayer(m, ForImplementation(base, *ImplementationPreset("megatron-2021"), Precision::kBf16));
  const int64_t ours = ActivationBytesPerLayer(m, ForImplementation(base, *ImplementationPreset("parallax"), Precision::kBf16));
  const int64_t mcore = ActivationBytesPerLayer(m, ForImplementation(base, *ImplementationPreset("megatron-core"), Precision::kBf16));
  // two hidden masks, and the probabilities with their dropout mask and output vs our lse
  EXPECT_EQ(m2021 - ours, 2 * sbh + 5 * as2b - 4 * m.heads * s);
  EXPECT_EQ(m2021 - mcore, 5 * as2b - 4 * m.heads * s);                  // probabilities and their dropout vs the lse
  EXPECT_EQ(EmbeddingActivationBytes(m, ForImplementation(base, *ImplementationPreset("parallax"), Precision::kBf16)), 0);
  EXPECT_EQ(EmbeddingActivationBytes(m, ForImplementation(base, *ImplementationPreset("megatron-core"), Precision::kBf16)), sbh);
  // The loss: Megatron's fp32 softmax beside the 16-bit logits; ours the logits and their gradient.
  const int64_t logits = s * m.vocab;
  EXPECT_EQ(HeadActivationBytes(m, ForImplementation(base, *ImplementationPreset("megatron-core"), Precision::kBf16)) -
                HeadActivationBytes(m, ForImplementation(base, *ImplementationPreset("parallax"), Precision::kBf16)),
            6 * logits - 4 * logits);  // (2 + 4) vs 2 x 2 bytes a logit
}

// Under fp8, Transformer Engine's linears keep the FP8 copy of their input (1 B an element, plus the
// recipe's block scales) in place of the 16-bit input: the QKV input, dense fc1's input and fc2's
// input (the activation output) of a GPT layer; under the delayed recipe the output projection keeps
// an FP8 copy beside the core attention's 16-bit output. Our executor keeps the 16-bit inputs.
TEST(Counting, Fp8LinearsKeepTheirFp8InputWhereTheImplementationDoes) {
  const ModelSpec m = Preset("llama3-8b");
  ActivationOptions base;
  base.micro_batch = 1;
  const int64_t sb = m.seq_len, sbh = sb * m.hidden, sbf = sb * m.ffn_hidden, out = sb * m.attn_out_dim();
  ImplementationProfile mcore = *ImplementationPreset("megatron-core");
  auto bytes = [&](const ImplementationProfile& impl, Precision p) {
    return ActivationBytesPerLayer(m, ForImplementation(base, impl, p));
  };
  const int64_t bf16 = bytes(mcore, Precision::kBf16);
  ASSERT_EQ(mcore.fp8_recipe.value, Fp8Recipe::kDelayed);
  // Three 16-bit linear inputs become FP8 (1 B saved each element), the projection's copy is added.
  EXPECT_EQ(bf16 - bytes(mcore, Precision::kFp8), (sbh + sbh + sbf) - out);
  mcore.fp8_recipe.value = Fp8Recipe::kTensorwise;  // linear_proj keeps the original: no copy
  EXPECT_EQ(bf16 - bytes(mcore, Precision::kFp8), sbh + sbh + sbf);
  mcore.fp8_recipe.value = Fp8Recipe::kMxfp8;  // one E8M0 scale byte per 32 elements beside the data
  const auto with_scales = [](int64_t n) { return (n * 33 + 31) / 32; };
  EXPECT_EQ(bf16 - bytes(mcore, Precision::kFp8), 2 * (2 * sbh - with_scales(sbh)) + 2 * sbf - with_scales(sbf));
  const ImplementationProfile ours = *ImplementationPreset("parallax");
  EXPECT_EQ(bytes(ours, Precision::kFp8), bytes(ours, Precision::kBf16));
}

// MoE layers: the router keeps the 16-bit norm output, the experts' fc1 and fc2 keep FP8 copies of
// their inputs (the dispatched tokens, the activation output), the shared expert's fc1 its own copy
// of the norm output and its fc2 an FP8 activation output.
TEST(Counting, Fp8MoeLayersKeepTheRoutersInputAndFp8ExpertInputs) {
  const ModelSpec m = Preset("deepseek-v3");
  ActivationOptions base;
  base.micro_batch = 1;
  const ImplementationProfile mcore = *ImplementationPreset("megatron-core");
  const ActivationOptions bf16 = ForImplementation(base, mcore, Precision::kBf16);
  const ActivationOptions fp8 = ForImplementation(base, mcore, Precision::kFp8);
  const int64_t tokens = m.seq_len, received = m.experts_per_token * tokens;
  EXPECT_EQ(MoeActivationBytes(m, bf16, 1) - MoeActivationBytes(m, fp8, 1),
            received * m.hidden + received * m.moe_ffn_hidden +         // routed fc1 and fc2 inputs
                tokens * m.shared_experts * m.moe_ffn_hidden - tokens * m.hidden);  // shared fc2 input; shared fc1's copy
  // MLA's two down-projections each keep an FP8 copy of the norm output: no saving there; the MoE
  // layer's pre-MLP norm output stays 16-bit for the router. Only the delayed recipe's projection copy differs.
  const int64_t attn_bf16 = ActivationBytesOfLayer(m, 3, bf16) - MoeActivationBytes(m, bf16, 1);
  const int64_t attn_fp8 = ActivationBytesOfLayer(m, 3, fp8) - MoeActivationBytes(m, fp8, 1);
  EXPECT_EQ(attn_fp8 - attn_bf16, tokens * m.attn_out_dim());
}

// Megatron-Core r0.12+ multiplies the router's probabilities into the experts' activation: the
// combine keeps nothing, the activation its output (f) and the fp32 probabilities.
TEST(Counting, ProbabilitiesInTheActivationFreeTheCombineBuffer) {
  const ModelSpec m = Preset("qwen3-30b-a3b");
  ActivationOptions base;
  base.micro_batch = 2;
  ImplementationProfile mcore = *ImplementationPreset("megatron-core");
  const int64_t before = MoeActivationBytes(m, ForImplementation(base, mcore, Precision::kBf16), 1);
  mcore.moe_probs_in_activation.value = true;
  const int64_t after = MoeActivationBytes(m, ForImplementation(base, mcore, Precision::kBf16), 1);
  const int64_t copies = m.experts_per_token * m.seq_len * 2;
  EXPECT_EQ(before - after, copies * (2 * m.hidden - 2 * m.moe_ffn_hidden - 4));
  // Under the moe_act recompute the activation (with its probabilities) is redone: only the fp32
  // probabilities stay beside fc1's output.
  base.recompute = Recompute::kSelective;
  base.selective_modules = kRecomputeMoeAct;
  mcore.moe_probs_in_activation.value = false;
  const int64_t redo_before = MoeActivationBytes(m, ForImplementation(base, mcore, Precision::kBf16), 1);
  mcore.moe_probs_in_activation.value = true;
  const int64_t redo_after = MoeActivationBytes(m, ForImplementation(base, mcore, Precision::kBf16), 1);
  EXPECT_EQ(redo_before - redo_after, copies * (2 * m.hidden - 4));
}

TEST(Counting, HeadActivationsScaleWithVocabOverTp) {
  const ModelSpec m = Preset("llama3-8b");
  ActivationOptions o;
  o.tp = 1;
  const int64_t t1 = HeadActivationBytes(m, o);
  o.tp = 8;
  const int64_t t8 = HeadActivationBytes(m, o);
  const int64_t logits1 = 6LL * m.seq_len * m.vocab;
  EXPECT_EQ(t1 - t8, logits1 - logits1 / 8);
}

}  // namespace
}  // namespace parallax

namespace parallax {
namespace {

// Where the attention's residual join is priced follows the profile: our executor joins it inside
// the MLP norm's kernel (read branch and residual, write sum and normalized rows); Megatron-Core
// adds it after the output projection (bias-dropout-add), before a plain norm.
TEST(OpCatalogueJoin, ResidualJoinPricedWhereTheImplementationRunsIt) {
  const ModelSpec m = *ModelPreset("gpt-tiny");
  OpShapeKey key;
  key.micro_batch = 2;
  key.element_bytes = 4;
  const double rows_bytes = 4.0 * static_cast<double>(key.micro_batch * m.seq_len * m.hidden);  // one [T, h] fp32
  auto fwd = [&](const ImplementationProfile& impl, OpKind op) {
    auto o = OpCatalogueEntry(BuildOpCatalogue(m, key, impl), op, Phase::kFwd, true);
    EXPECT_TRUE(o.has_value()) << ToString(op);
    return o ? o->bytes : -1.0;
  };
  const ImplementationProfile ours = DefaultImplementation();
  const ImplementationProfile mcore = *ImplementationPreset("megatron-core");
  ASSERT_TRUE(ours.residual_join_in_norm.value);
  ASSERT_FALSE(mcore.residual_join_in_norm.value);
  EXPECT_DOUBLE_EQ(fwd(ours, OpKind::kAttnOut), 0.0);
  EXPECT_DOUBLE_EQ(fwd(ours, OpKind::kMlpNorm), 4 * rows_bytes);
  EXPECT_GT(fwd(mcore, OpKind::kAttnOut), 0.0);
  EXPECT_DOUBLE_EQ(fwd(mcore, OpKind::kMlpNorm), 2 * rows_bytes);
  // The norm before attention is a plain norm in both.
  EXPECT_DOUBLE_EQ(fwd(ours, OpKind::kAttnNorm), 2 * rows_bytes);
}

// The cross-entropy's traffic per logit as each implementation runs it: our executor's kernels
// read the logits twice (row max, then the statistics; backward: read them, write the gradient);
// Megatron's torch sequence makes a full pass per step (cast, max, subtract, exp, sum,
// normalise; backward scale and cast back), none of the casts when training in fp32.
TEST(OpCatalogueLoss, CrossEntropyTrafficAsTheImplementationRunsIt) {
  const ModelSpec m = *ModelPreset("gpt-tiny");
  OpShapeKey key;
  key.micro_batch = 2;
  const double logits = static_cast<double>(key.micro_batch * m.seq_len * m.vocab);
  auto per_logit = [&](const ImplementationProfile& impl, int64_t element_bytes, Phase ph) {
    key.element_bytes = element_bytes;
    auto o = OpCatalogueEntry(BuildOpCatalogue(m, key, impl), OpKind::kLoss, ph, false);
    EXPECT_TRUE(o.has_value());
    return o ? o->bytes / logits : -1.0;
  };
  const ImplementationProfile ours = DefaultImplementation();
  ASSERT_FALSE(ours.fp32_cross_entropy.value);
  EXPECT_DOUBLE_EQ(per_logit(ours, 2, Phase::kFwd), 4);
  EXPECT_DOUBLE_EQ(per_logit(ours, 2, Phase::kBwd), 4);
  EXPECT_DOUBLE_EQ(per_logit(ours, 4, Phase::kFwd), 8);
  for (const char* name : {"megatron-core", "megatron-2021", "megatron-2022", "deepspeed"}) {
    const ImplementationProfile impl = *ImplementationPreset(name);
    ASSERT_TRUE(impl.fp32_cross_entropy.value) << name;
    EXPECT_DOUBLE_EQ(per_logit(impl, 2, Phase::kFwd), 38) << name;  // 6 + 4 + 8 + 8 + 4 + 8
    EXPECT_DOUBLE_EQ(per_logit(impl, 2, Phase::kBwd), 14) << name;  // 8 + 6
    EXPECT_DOUBLE_EQ(per_logit(impl, 4, Phase::kFwd), 32) << name;  // no cast
    EXPECT_DOUBLE_EQ(per_logit(impl, 4, Phase::kBwd), 8) << name;
  }
}

// The loss's TP collective as each implementation runs it (loss_reduction): our executor
// all-gathers each vocabulary slice's [row max | sum_exp | target logit] (fp32, tokens x 3 per
// rank) right after the loss; Megatron all-reduces the row max, target logits and sums (3 x 4 B
// per token, priced as one op). Nothing at tp 1.
TEST(OpCatalogueLoss, StatisticsCollectiveAsTheImplementationRunsIt) {
  const ModelSpec m = *ModelPreset("gpt-tiny");
  OpShapeKey key;
  key.micro_batch = 2;
  key.tp = 4;
  const double tokens = static_cast<double>(key.micro_batch * m.seq_len);
  auto after_loss = [&](const ImplementationProfile& impl) -> std::optional<OpSpec> {
    const auto fwd = BuildOpCatalogue(m, key, impl).head.fwd;
    for (size_t i = 0; i + 1 < fwd.size(); ++i) {
      if (fwd[i].op == OpKind::kLoss) return fwd[i + 1];
    }
    return std::nullopt;
  };
  const ImplementationProfile ours = DefaultImplementation();
  ASSERT_EQ(ours.loss_reduction.value, LossReduction::kAllGather);
  auto o = after_loss(ours);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->op, OpKind::kTpAllGather);
  EXPECT_DOUBLE_EQ(o->bytes, 3 * 4 * tokens * 4);
  for (const char* name : {"megatron-core", "megatron-2021", "megatron-2022", "deepspeed"}) {
    const ImplementationProfile impl = *ImplementationPreset(name);
    EXPECT_EQ(impl.loss_reduction.value, LossReduction::kAllReduce) << name;
    o = after_loss(impl);
    ASSERT_TRUE(o.has_value()) << name;
    EXPECT_EQ(o->op, OpKind::kTpAllReduce) << name;
    EXPECT_DOUBLE_EQ(o->bytes, 3 * 4 * tokens) << name;
  }
  key.tp = 1;
  EXPECT_FALSE(after_loss(ours).has_value());  // the loss is the head's last forward op
}

// The QKV projection as each implementation runs it: Megatron one GEMM against the concatenated
// weight; our executor three (q, k, v) with a bias add each, and the rotary embedding of q and k
// for a rotary model, in the same op. The FLOPs are the same.
TEST(OpCatalogueQkv, OneGemmOrThreeAsTheImplementationRunsThem) {
  OpShapeKey key;
  key.micro_batch = 2;
  key.tp = 2;
  key.element_bytes = 4;
  const ImplementationProfile ours = DefaultImplementation();
  const ImplementationProfile mcore = *ImplementationPreset("megatron-core");
  ASSERT_FALSE(ours.fused_qkv_gemm.value);
  ASSERT_TRUE(mcore.fused_qkv_gemm.value);
  for (const char* name : {"gpt-tiny", "llama3-8b"}) {
    const ModelSpec m = *ModelPreset(name);
    const int64_t T = key.micro_batch * m.seq_len, q = m.hidden / key.tp, kv = m.kv_dim() / key.tp;
    for (Phase ph : {Phase::kFwd, Phase::kBwd}) {
      const auto a = OpCatalogueEntry(BuildOpCatalogue(m, key, ours), OpKind::kQkv, ph, true);
      const auto b = OpCatalogueEntry(BuildOpCatalogue(m, key, mcore), OpKind::kQkv, ph, true);
      ASSERT_TRUE(a && b) << name;
      EXPECT_EQ(a->gemms.size(), ph == Phase::kFwd ? 3u : 6u) << name;
      EXPECT_EQ(b->gemms.size(), ph == Phase::kFwd ? 1u : 2u) << name;
      EXPECT_DOUBLE_EQ(a->flops, b->flops) << name;
      EXPECT_DOUBLE_EQ(b->bytes, 0.0) << name;
      if (ph == Phase::kFwd) {
        EXPECT_EQ(a->gemms[0].n, q);
        EXPECT_EQ(a->gemms[1].n, kv);
        EXPECT_EQ(b->gemms[0].n, q + 2 * kv);
      }
      // Bias adds read and write the outputs (backward: the bias gradients read dY once); the
      // rotary embedding reads and writes q and k.
      const double out = 4.0 * static_cast<double>(T * (q + 2 * kv));
      const double bias = m.bias ? (ph == Phase::kFwd ? 2 * out : out) : 0.0;
      const double rope = m.position == PositionKind::kRotary ? 2 * 4.0 * static_cast<double>(T * (q + kv)) : 0.0;
      EXPECT_DOUBLE_EQ(a->bytes, bias + rope) << name;
      EXPECT_GT(a->bytes, 0.0) << name;
    }
  }
}

// A backward linear lists its GEMMs as (input gradient, weight gradient) pairs: the input
// gradient has the tokens as its rows (m = T), the weight gradient reduces over them (k = T).
// planner/cost/layer_ops.cpp hides Megatron's asynchronous backward collectives by that order.
TEST(OpCatalogueBackward, InputGradientThenWeightGradientPerWeight) {
  for (const char* profile : {"parallax", "megatron-2021"}) {  // three qkv GEMMs, or one fused
    for (bool sp : {false, true}) {
      const ModelSpec m = *ModelPreset("gpt3-175b");
      OpShapeKey key;
      key.micro_batch = 1;
      key.tp = 8;
      key.sequence_parallel = sp;
      key.element_bytes = 2;
      const OpCatalogue cat = BuildOpCatalogue(m, key, *ImplementationPreset(profile));
      const int64_t T = m.seq_len;
      ASSERT_NE(T, m.hidden);
      int checked = 0;
      for (const auto* list : {&cat.layer.bwd, &cat.head.bwd}) {
        for (const OpSpec& o : *list) {
          if (o.phase != Phase::kBwd || o.gemms.empty() || o.op == OpKind::kAttnCore) continue;
          ASSERT_EQ(o.gemms.size() % 2, 0u) << ToString(o.op);
          for (size_t g = 0; g < o.gemms.size(); g += 2) {
            EXPECT_EQ(o.gemms[g].m, T) << profile << " " << ToString(o.op) << " GEMM " << g;
            EXPECT_EQ(o.gemms[g + 1].k, T) << profile << " " << ToString(o.op) << " GEMM " << g + 1;
          }
          ++checked;
        }
      }
      EXPECT_EQ(checked, 5) << "qkv, attn_out, fc1, fc2, lm_head";
    }
  }
}

// The weight-gradient GEMM adds into the fp32 gradient buffer (cuBLAS beta = 1, 4-byte C read and
// written) where the implementation accumulates in the GEMM: our executor (LinearBackward) and
// Megatron-Core (gradient_accumulation_fusion). Megatron-LM 2021 writes a 16-bit gradient that
// autograd adds afterwards, DeepSpeed keeps 16-bit gradients: no accumulating GEMM. Never the input
// gradient, a forward or recomputed GEMM, or attention's products.
TEST(OpCatalogueBackward, WeightGradientsAccumulateInTheGemmWhereTheImplementationDoes) {
  const ModelSpec m = *ModelPreset("gpt3-175b");
  OpShapeKey key;
  key.micro_batch = 1;
  key.tp = 8;
  key.recompute = Recompute::kFull;
  key.element_bytes = 2;
  for (const char* profile : {"parallax", "megatron-core", "megatron-2021", "megatron-2022", "deepspeed"}) {
    const ImplementationProfile impl = *ImplementationPreset(profile);
    const bool expect = impl.grad_accumulation.value == GradAccumulation::kInGemm &&
                        impl.grad_buffer_dtype.value == GradDType::kFp32;
    const OpCatalogue cat = BuildOpCatalogue(m, key, impl);
    int accumulating = 0;
    for (const UnitOpSpecs* unit : {&cat.layer, &cat.embedding, &cat.head}) {
      for (const auto* list : {&unit->fwd, &unit->bwd}) {
        for (const OpSpec& o : *list) {
          for (size_t g = 0; g < o.gemms.size(); ++g) {
            const bool wgrad = o.phase == Phase::kBwd && o.op != OpKind::kAttnCore && g % 2 == 1;
            EXPECT_EQ(o.gemms[g].accumulate, expect && wgrad) << profile << " " << ToString(o.op) << " GEMM " << g;
            accumulating += o.gemms[g].accumulate ? 1 : 0;
          }
        }
      }
    }
    // qkv (one fused GEMM, or three), attn_out, fc1, fc2, lm_head
    const int weights = impl.fused_qkv_gemm.value ? 5 : 7;
    EXPECT_EQ(accumulating, expect ? weights : 0) << profile;
  }
  EXPECT_TRUE(ImplementationPreset("parallax")->grad_accumulation.value == GradAccumulation::kInGemm);
  EXPECT_TRUE(ImplementationPreset("megatron-core")->grad_accumulation.value == GradAccumulation::kInGemm);
}

}  // namespace
}  // namespace parallax
