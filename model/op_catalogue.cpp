#include "model/op_catalogue.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace parallax {
namespace {

//! A dimension split across tp ranks (the plan checks that tp divides it).
int64_t PerRank(int64_t dim, int64_t tp) { return dim / tp; }

class Catalogue {
 public:
  Catalogue(const ModelSpec& m, const OpShapeKey& k, const ImplementationProfile& impl) : m_(m), k_(k), impl_(impl) {
    s_ = k.seq_len > 0 ? k.seq_len : m.seq_len;
    T_ = k.micro_batch * s_;
    t_ = k.tp;
    h_ = m.hidden;
    e_ = static_cast<double>(k.element_bytes);
    sT_ = k.sequence_parallel ? T_ / t_ : T_;
    drop_ = m.dropout && impl.applies_dropout.value ? 1.0 : 0.0;  // the implementation may ignore the flag
    flash_ = impl.attention.value == AttentionKernel::kFlash;
    accumulate_wgrad_ =
        impl.grad_accumulation.value == GradAccumulation::kInGemm && impl.grad_buffer_dtype.value == GradDType::kFp32;
    keys_ = s_;
  }

  //! The kind of layer the next LayerFwd / LayerBwd builds (LayerKindOf).
  void SetKind(int kind) {
    moe_ = (kind & 1) != 0;
    local_ = (kind & 2) != 0;
    keys_ = local_ ? std::min(s_, m_.attention_window) : s_;
  }

  OpSpec Gemm(OpKind op, Phase ph, std::initializer_list<GemmShape> shapes, double extra_bytes = 0,
              int64_t extra_kernels = 0) const {
    OpSpec o;
    o.op = op;
    o.phase = ph;
    // A backward linear's (input gradient, weight gradient) pairs: the weight gradient adds into
    // the fp32 buffer in its GEMM where the implementation does so (not attention's products).
    const bool pairs = ph == Phase::kBwd && op != OpKind::kAttnCore && accumulate_wgrad_;
    const bool fp8 = k_.fp8_linear && IsLinear(op);
    // Per-tensor current scaling (the profile's fp8_recipe tensorwise) reads the input once more for
    // its amax and computes the scale in a kernel of its own before the cast (Transformer Engine
    // csrc/quantizer.cpp Float8CurrentScalingQuantizer::quantize_impl: nvte_compute_amax,
    // nvte_compute_scale_from_amax, nvte_quantize_v2). The block recipes find their scales in the
    // cast's own pass and write one beside each block of each of the two copies: MXFP8 an E8M0 byte
    // per 32 elements (TransformerEngine d0067d0 common/cast/mxfp8/quantize_mxfp8.cuh
    // quantize_mxfp8_kernel: one read, rowwise and colwise outputs with scales_rowwise and
    // scales_colwise), Float8BlockScaling an fp32 per 1 x 128 vector (common/transpose/
    // quantize_transpose_vector_blockwise.cu, kTileDim 128, tile_scales_inv_c and _t): 1/32 B an
    // element a copy either way. Delayed scaling records the amax in the cast's pass.
    const Fp8Recipe recipe = impl_.fp8_recipe.value;
    const bool current = recipe == Fp8Recipe::kTensorwise;
    const bool block = recipe == Fp8Recipe::kMxfp8 || recipe == Fp8Recipe::kBlockwise;
    const double cast_bytes_per_element = current ? 6.0 : block ? 4.0 + 2.0 / 32 : 4.0;
    const int64_t kernels_per_cast = current ? 3 : 1;
    double cast_bytes = 0;
    int64_t casts = 0;
    for (const GemmShape& g : shapes) {
      o.gemms.push_back(g);
      o.gemms.back().accumulate = pairs && o.gemms.size() % 2 == 0;
      o.gemms.back().fp8 = fp8;
      o.flops += g.flops();
      ++o.kernels;
      // The FP8 cast + transpose of what this GEMM reads fresh: the forward's input (m x k), the
      // backward's output gradient (an input-gradient GEMM's m x k; its weight-gradient partner
      // reads the transposed copies already made).
      if (fp8 && (ph != Phase::kBwd || o.gemms.size() % 2 == 1)) {
        cast_bytes += cast_bytes_per_element * static_cast<double>(g.m) * static_cast<double>(g.k);
        casts += kernels_per_cast;
      }
    }
    o.executed_flops = o.flops;
    o.bytes = extra_bytes + cast_bytes;
    o.kernels += (extra_bytes > 0 ? extra_kernels : 0) + casts;
    return o;
  }
  //! The linear layers Transformer Engine runs in FP8 (te.Linear / LayerNormLinear / LayerNormMLP
  //! inside the layer, a multi-token-prediction module's eh_proj (a TE column-parallel linear run
  //! inside its fp8 context: multi_token_prediction.py _proj_and_transformer_layer), and the routed
  //! experts' te.GroupedLinear or per-expert TE linears:
  //! Megatron-Core moe/experts.py TEGroupedMLP / SequentialMLP, whose FP8 GEMMs are why
  //! transformer_config.py has moe_router_padding_for_fp8; the embedding, the LM head and the
  //! router's torch linear stay 16-bit).
  static bool IsLinear(OpKind op) {
    return op == OpKind::kQkv || op == OpKind::kAttnOut || op == OpKind::kFc1 || op == OpKind::kFc2 ||
           op == OpKind::kExpertFc1 || op == OpKind::kExpertFc2 || op == OpKind::kMtpProj;
  }
  OpSpec Mem(OpKind op, Phase ph, double bytes, int64_t kernels = 1) const {
    OpSpec o;
    o.op = op;
    o.phase = ph;
    o.bytes = bytes;
    o.kernels = kernels;
    return o;
  }
  void AddTp(std::vector<OpSpec>& out, CollectiveKind kind, Phase ph, double bytes) const {
    if (t_ <= 1) return;
    const OpKind op = kind == CollectiveKind::kAllGather       ? OpKind::kTpAllGather
                      : kind == CollectiveKind::kReduceScatter ? OpKind::kTpReduceScatter
                                                               : OpKind::kTpAllReduce;
    OpSpec o;
    o.op = op;
    o.phase = ph;
    o.bytes = bytes;
    o.kernels = 1;
    o.tp_collective = kind;
    out.push_back(o);
  }

  // Per-tensor current scaling (fp8_recipe tensorwise) with sequence parallelism: Transformer Engine
  // quantizes a column-parallel linear's input (forward) and a row-parallel linear's output gradient
  // (backward) before their all-gather over tp, with one scale for the gathered tensor, so the
  // ranks' amaxes are all-reduced (MAX, one fp32) over tp between the amax kernel and the cast,
  // and the cast waits for it (TransformerEngine d0067d0: pytorch/module/layernorm_linear.py lines
  // 234-237, the column-parallel input; linear.py lines 818-824, the row-parallel grad output;
  // csrc/quantizer.cpp lines 1014-1021, the all-reduce and its wait). Priced before the gather.
  void AmaxReduceBeforeGather(std::vector<OpSpec>& out, Phase ph) const {
    if (k_.fp8_linear && k_.sequence_parallel && impl_.fp8_recipe.value == Fp8Recipe::kTensorwise) {
      AddTp(out, CollectiveKind::kAllReduce, ph, 4);
    }
  }

  // Bias + dropout + residual add after a row-parallel GEMM: one kernel when fused (read x and
  // residual, write out, + mask), else bias add, dropout and add as three (Megatron-LM
  // megatron/model/transformer.py bias_dropout_add vs its fused variant).
  double ResidualBytes(bool bwd) const {
    const double fused = bwd ? (2 * e_ + drop_) : (3 * e_ + drop_);
    const double unfused = bwd ? (4 * e_ + drop_) : (7 * e_ + drop_);
    return (impl_.fused_bias_dropout_add.value ? fused : unfused) * sT_ * h_;
  }
  int64_t ResidualKernels() const { return impl_.fused_bias_dropout_add.value ? 1 : 3; }

  struct LossTraffic {
    double fwd = 0, bwd = 0;  //!< bytes per logit (per token per local vocab entry)
    int64_t fwd_kernels = 1, bwd_kernels = 1;
  };
  //! What the cross-entropy moves per logit. Without fp32_cross_entropy (our executor's kernels,
  //! executor/cuda/embedding_loss_kernels.cu): forward the logits read twice in the compute dtype
  //! (row max; then the sum of exponentials and the target logit), per-row fp32 statistics only;
  //! backward (statistics combined, then the gradient) one read of the logits and one write of
  //! their gradient. With it, Megatron-LM's torch sequence (v2.5 mpu/cross_entropy.py
  //! after gpt_model.py's output.float(); Megatron-Core r0.8 tensor_parallel/cross_entropy.py,
  //! cross_entropy_loss_fusion off by default), one full pass each: cast to fp32 (e + 4; none when
  //! the logits already are fp32), max (4), subtract in place (8), exp in place (8), sum (4),
  //! normalise in place (8); backward: scale in place (8), then autograd casts the gradient back to
  //! the logits' dtype (4 + e; none in fp32).
  LossTraffic LossBytesPerLogit() const {
    if (!impl_.fp32_cross_entropy.value) return {2 * e_, 2 * e_, 2, 2};
    const double cast = e_ < 4 ? e_ + 4 : 0;
    const int64_t casts = e_ < 4 ? 1 : 0;
    return {cast + 4 + 8 + 8 + 4 + 8, 8 + cast, 5 + casts, 1 + casts};
  }

  OpSpec AttnCore(Phase ph, bool bwd) const {
    const int64_t d = m_.head_dim();
    const int64_t batch = k_.micro_batch * m_.heads / t_;
    const double scores = static_cast<double>(batch) * s_ * keys_;
    if (flash_) {
      // One fused kernel (three with FA2's backward preprocessing and dQ conversion); only Q, K,
      // V, O (and their gradients) touch HBM. Full-square FLOPs by convention; causal executes
      // the blocks on and below the diagonal (~half).
      OpSpec o;
    o.op = OpKind::kAttnCore;
    o.phase = ph;
      o.flash = FlashShape{batch, s_, keys_, d, !local_, bwd};
      // QK^T + AV (MLA: queries and keys of qk_nope + qk_rope, values of v_head_dim).
      const double square = m_.mla() ? 2.0 * scores * static_cast<double>(d + m_.value_dim())
                                     : 4.0 * scores * static_cast<double>(d);
      o.flops = bwd ? 2 * square : square;
      // A local layer's band of `keys_` keys per query is all executed; a global one's causal triangle about half.
      const double causal = local_ ? 1.0 : 0.5 + 0.5 / static_cast<double>(std::max<int64_t>(s_ / 128, 1));
      o.executed_flops = (bwd ? 2.5 : 1.0) * square * causal;  // backward recomputes QK^T
      const double qkvo = e_ * static_cast<double>(T_) *
                          static_cast<double>(PerRank(3 * m_.q_dim() + m_.attn_out_dim(), t_));
      o.bytes = bwd ? 2 * qkvo : qkvo;
      o.kernels = bwd ? 3 : 1;
      return o;
    }
    // Unfused (Megatron-LM 2021): QK^T batched GEMM, fused scale-mask-softmax (+ dropout) over the
    // s x s scores in HBM, AV batched GEMM.
    const int64_t kv = keys_;
    if (!bwd) {
      return Gemm(OpKind::kAttnCore, ph, {{s_, kv, d, batch}, {s_, d, kv, batch}},
                  scores * (2 * e_ + drop_ * (2 * e_ + 1)), drop_ > 0 ? 2 : 1);
    }
    return Gemm(OpKind::kAttnCore, ph, {{s_, d, kv, batch}, {kv, d, s_, batch}, {s_, kv, d, batch}, {kv, d, s_, batch}},
                scores * (3 * e_ + drop_ * (2 * e_ + 1)), drop_ > 0 ? 2 : 1);
  }

  // The QKV projection. Fused (Megatron): one GEMM against the concatenated weight, bias in its
  // epilogue. Unfused (our executor): one GEMM per projection, each followed by its bias add, and
  // the rotary embedding of q and k in the same op; backward: per projection dX and dW, the bias
  // gradient (a column sum of dY), and the inverse rotation of dq and dk first.
  OpSpec Qkv(Phase ph, bool bwd) const {
    if (m_.mla()) return MlaQkv(ph, bwd);
    const int64_t q = m_.q_dim() / t_, kv = m_.kv_dim() / t_;
    const double T = static_cast<double>(T_);
    if (impl_.fused_qkv_gemm.value) {
      if (!bwd) return Gemm(OpKind::kQkv, ph, {{T_, q + 2 * kv, h_, 1}});
      return Gemm(OpKind::kQkv, ph, {{T_, h_, q + 2 * kv, 1}, {q + 2 * kv, h_, T_, 1}});
    }
    const bool rotary = m_.position == PositionKind::kRotary;
    const double rope = rotary ? 2 * e_ * T * static_cast<double>(q + kv) : 0;
    const int64_t rope_kernels = rotary ? 2 : 0;
    const double bias_fwd = m_.bias ? 2 * e_ * T * static_cast<double>(q + 2 * kv) : 0;
    const double bias_bwd = m_.bias ? e_ * T * static_cast<double>(q + 2 * kv) : 0;
    const int64_t bias_kernels = m_.bias ? 3 : 0;
    if (!bwd) {
      return Gemm(OpKind::kQkv, ph, {{T_, q, h_, 1}, {T_, kv, h_, 1}, {T_, kv, h_, 1}}, bias_fwd + rope,
                  bias_kernels + rope_kernels);
    }
    return Gemm(OpKind::kQkv, ph,
                {{T_, h_, q, 1}, {q, h_, T_, 1}, {T_, h_, kv, 1}, {kv, h_, T_, 1}, {T_, h_, kv, 1}, {kv, h_, T_, 1}},
                bias_bwd + rope, bias_kernels + rope_kernels);
  }

  // Multi-head latent attention's projections (DeepSeek-V2 paper, section 2.1; Megatron-Core
  // multi_latent_attention.py): the down-projections of queries and of keys/values (+ the decoupled
  // rotary key) run whole on every TP rank, the up-projections are column-parallel; their latent
  // RMSNorms and the rotary embedding are the memory-bound part. Backward: (dX, dW) per GEMM.
  OpSpec MlaQkv(Phase ph, bool bwd) const {
    const int64_t ql = m_.q_lora_rank, kvl = m_.kv_lora_rank, rope = m_.qk_rope_head_dim;
    const int64_t q_up = m_.heads * m_.head_dim() / t_, kv_up = m_.heads * (m_.qk_nope_head_dim + m_.v_head_dim) / t_;
    std::vector<GemmShape> fwd;
    if (ql > 0) {
      fwd = {{T_, ql, h_, 1}, {T_, q_up, ql, 1}};
    } else {
      fwd = {{T_, q_up, h_, 1}};
    }
    fwd.push_back({T_, kvl + rope, h_, 1});
    fwd.push_back({T_, kv_up, kvl, 1});
    const double T = static_cast<double>(T_);
    const double norms_rope = (bwd ? 4 : 2) * e_ * T * static_cast<double>(ql + kvl) + 2 * e_ * T * static_cast<double>(q_up);
    OpSpec o;
    if (!bwd) {
      o = Gemm(OpKind::kQkv, ph, {}, norms_rope, ql > 0 ? 3 : 2);
      for (const GemmShape& g : fwd) AddGemm(o, g);
      return o;
    }
    o = Gemm(OpKind::kQkv, ph, {}, norms_rope, ql > 0 ? 3 : 2);
    for (const GemmShape& g : fwd) {
      AddGemm(o, {g.m, g.k, g.n, 1});
      AddGemm(o, {g.n, g.k, g.m, 1}, accumulate_wgrad_);
    }
    return o;
  }
  // mla_up_proj's recompute: the query and key/value up-projections from the latents and the
  // rotary embedding of the queries, again before the attention backward.
  OpSpec MlaUpProjFwd() const {
    const int64_t ql = m_.q_lora_rank > 0 ? m_.q_lora_rank : h_;
    const int64_t q_up = m_.heads * m_.head_dim() / t_, kv_up = m_.heads * (m_.qk_nope_head_dim + m_.v_head_dim) / t_;
    OpSpec o = Gemm(OpKind::kQkv, Phase::kRecompute, {}, 2 * e_ * static_cast<double>(T_) * static_cast<double>(q_up), 1);
    AddGemm(o, {T_, q_up, ql, 1});
    AddGemm(o, {T_, kv_up, m_.kv_lora_rank, 1});
    return o;
  }
  static void AddGemm(OpSpec& o, GemmShape g, bool accumulate = false) {
    g.accumulate = accumulate;
    o.gemms.push_back(g);
    o.flops += g.flops();
    o.executed_flops += g.flops();
    ++o.kernels;
  }

  // A dense MLP of inner width f (a dense layer's ffn_hidden; an MoE layer's shared experts,
  // shared_experts x moe_ffn_hidden), forward.
  void MlpFwd(std::vector<OpSpec>& o, Phase ph, int64_t f) const {
    const int64_t fin = m_.mlp == MlpKind::kSwiglu ? 2 * f : f;
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    const CollectiveKind out_coll = k_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
    const bool fused_act = impl_.fused_bias_activation.value;
    AmaxReduceBeforeGather(o, ph);
    if (k_.sequence_parallel) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Gemm(OpKind::kFc1, ph, {{T_, fin / t_, h_, 1}}));
    // Bias + activation: read and write the fc1 output once when fused, twice when not.
    const double act = (m_.mlp == MlpKind::kSwiglu ? 3 : 2) * e_ * static_cast<double>(T_) * static_cast<double>(PerRank(f, t_));
    o.push_back(Mem(OpKind::kAct, ph, fused_act || !m_.bias ? act : 2 * act, fused_act || !m_.bias ? 1 : 2));
    o.push_back(Gemm(OpKind::kFc2, ph, {{T_, h_, f / t_, 1}}, ResidualBytes(false), ResidualKernels()));
    AddTp(o, out_coll, ph, e_ * Th);
  }

  void MlpBwd(std::vector<OpSpec>& o, int64_t f) const {
    const Phase ph = Phase::kBwd;
    const int64_t fin = m_.mlp == MlpKind::kSwiglu ? 2 * f : f;
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    const bool sp = k_.sequence_parallel;
    const bool fused_act = impl_.fused_bias_activation.value;
    // Backward of a reduce-scatter is an all-gather (SP); of an all-reduce "g", the identity.
    AmaxReduceBeforeGather(o, ph);
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Gemm(OpKind::kFc2, ph, {{T_, f / t_, h_, 1}, {f / t_, h_, T_, 1}}, ResidualBytes(true), ResidualKernels()));
    const double act = (m_.mlp == MlpKind::kSwiglu ? 5 : 3) * e_ * static_cast<double>(T_) * static_cast<double>(PerRank(f, t_));
    o.push_back(Mem(OpKind::kAct, ph, fused_act || !m_.bias ? act : 1.5 * act, fused_act || !m_.bias ? 1 : 2));
    // SP keeps fc1's input sharded and gathers it again for the weight gradient (Korthikanti et al.
    // 2022, section 4.2.2); counted exposed, as the executor runs it.
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Gemm(OpKind::kFc1, ph, {{T_, h_, fin / t_, 1}, {fin / t_, h_, T_, 1}}));
    AddTp(o, sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, ph, e_ * Th);
  }

  //! What the routed experts of one MoE layer see on this rank (balanced routing times the load
  //! factor): each rank routes its sequence shard's tokens (Megatron-Core requires sequence
  //! parallelism with tp > 1), k copies each; the etp group gathers its ranks' received tokens.
  struct Routed {
    double tokens = 0;      //!< the rank's routed tokens (its sequence shard)
    int64_t rows = 0;       //!< the same as a GEMM dimension (the router's m)
    double topk = 0;        //!< experts per token (k)
    double received = 0;    //!< token copies its experts process: k x tokens x etp x load
    int64_t local = 1;      //!< experts on this rank
    int64_t per_expert = 0; //!< tokens per local expert: the grouped GEMM's m
    int64_t f = 0;          //!< an expert's inner width on this etp rank (moe_ffn_hidden / etp)
    int64_t fin = 0;        //!< its fc1's output width (2 f for SwiGLU's gate and up)
  };
  Routed RoutedShape() const {
    Routed r;
    r.tokens = sT_;
    r.rows = static_cast<int64_t>(sT_);
    r.topk = static_cast<double>(m_.experts_per_token);
    r.f = m_.moe_ffn_hidden / k_.etp;
    r.fin = m_.mlp == MlpKind::kSwiglu ? 2 * r.f : r.f;
    r.received = r.topk * sT_ * static_cast<double>(k_.etp) * k_.expert_load;
    r.local = std::max<int64_t>(m_.experts / std::max<int64_t>(k_.ep, 1), 1);
    r.per_expert = std::max<int64_t>(static_cast<int64_t>(std::ceil(r.received / static_cast<double>(r.local))), 1);
    return r;
  }
  //! The dispatch (or, `combine`, the return) of the permuted tokens over the ep group: an all-to-all
  //! of the rank's k copies; the all-gather dispatcher gathers every rank's tokens instead and
  //! reduce-scatters them back.
  void AddDispatch(std::vector<OpSpec>& out, Phase ph, bool combine, bool backward) const {
    if (k_.ep <= 1) return;
    const Routed r = RoutedShape();
    OpSpec o;
    o.op = combine ? OpKind::kMoeCombine : OpKind::kMoeDispatch;
    o.phase = ph;
    o.kernels = 1;
    o.group = CommGroup::kEp;
    if (k_.dispatcher == MoeDispatcher::kAllGather) {
      const bool gather = combine == backward;  // dispatch fwd and combine bwd gather
      o.tp_collective = gather ? CollectiveKind::kAllGather : CollectiveKind::kReduceScatter;
      o.bytes = e_ * r.tokens * static_cast<double>(h_ * k_.ep);
    } else {
      o.tp_collective = CollectiveKind::kAllToAll;
      o.bytes = e_ * static_cast<double>(m_.experts_per_token) * r.tokens * static_cast<double>(h_) * k_.expert_load;
    }
    out.push_back(o);
  }
  //! etp > 1: the received tokens gathered over the etp group before the experts (`gather`), their
  //! partial outputs reduce-scattered after (Megatron-Core's expert tensor parallelism).
  void AddEtp(std::vector<OpSpec>& out, Phase ph, bool gather) const {
    if (k_.etp <= 1) return;
    OpSpec o;
    o.op = gather ? OpKind::kTpAllGather : OpKind::kTpReduceScatter;
    o.phase = ph;
    o.kernels = 1;
    o.group = CommGroup::kEtp;
    o.tp_collective = gather ? CollectiveKind::kAllGather : CollectiveKind::kReduceScatter;
    o.bytes = e_ * RoutedShape().received * static_cast<double>(h_);
    out.push_back(o);
  }

  //! The routed experts' activation, forward (or rerun by the moe_act recompute module): reads fc1's
  //! output(s), writes the activation.
  OpSpec ExpertActFwd(Phase ph) const {
    const Routed r = RoutedShape();
    return Mem(OpKind::kExpertAct, ph, (m_.mlp == MlpKind::kSwiglu ? 3 : 2) * e_ * r.received * static_cast<double>(r.f));
  }

  // The routed experts, forward: router GEMM and its top-k (fp32 scores written, read by the
  // softmax / sigmoid and the top-k), permute, dispatch, grouped GEMMs of the rank's experts at their
  // token counts (each expert's fc1 over moe_ffn_hidden / etp), combine, unpermute (the k outputs
  // read, weighted and summed into the token, added to the residual).
  void RoutedFwd(std::vector<OpSpec>& o, Phase ph) const {
    const Routed r = RoutedShape();
    const int64_t E = m_.experts, f = r.f, fin = r.fin, Tl = r.rows;
    const double k = r.topk, hd = static_cast<double>(h_);
    o.push_back(Gemm(OpKind::kRouter, ph, {{Tl, E, h_, 1}}, 12.0 * r.tokens * static_cast<double>(E),
                     m_.router == RouterKind::kSigmoid ? 4 : 3));
    o.push_back(Mem(OpKind::kPermute, ph, 2 * e_ * k * r.tokens * hd));
    AddDispatch(o, ph, false, false);
    AddEtp(o, ph, true);
    o.push_back(Gemm(OpKind::kExpertFc1, ph, {{r.per_expert, fin, h_, r.local}}));
    o.push_back(ExpertActFwd(ph));
    o.push_back(Gemm(OpKind::kExpertFc2, ph, {{r.per_expert, h_, f, r.local}}));
    AddEtp(o, ph, false);
    AddDispatch(o, ph, true, false);
    o.push_back(Mem(OpKind::kUnpermute, ph, e_ * k * r.tokens * hd + 3 * e_ * r.tokens * hd));
  }

  void RoutedBwd(std::vector<OpSpec>& o) const {
    const Phase ph = Phase::kBwd;
    const Routed r = RoutedShape();
    const int64_t E = m_.experts, f = r.f, fin = r.fin, Tl = r.rows;
    const double k = r.topk, hd = static_cast<double>(h_);
    // The unpermute's gradient: the token gradient copied to its k outputs, each scaled by its
    // probability, and the probabilities' gradient (a dot product per copy).
    o.push_back(Mem(OpKind::kUnpermute, ph, 2 * e_ * k * r.tokens * hd + 2 * e_ * r.tokens * hd));
    AddDispatch(o, ph, true, true);
    AddEtp(o, ph, true);
    o.push_back(Gemm(OpKind::kExpertFc2, ph, {{r.per_expert, f, h_, r.local}, {f, h_, r.per_expert, r.local}}));
    const double act = (m_.mlp == MlpKind::kSwiglu ? 5 : 3) * e_ * r.received * static_cast<double>(f);
    o.push_back(Mem(OpKind::kExpertAct, ph, act));
    o.push_back(Gemm(OpKind::kExpertFc1, ph, {{r.per_expert, h_, fin, r.local}, {fin, h_, r.per_expert, r.local}}));
    AddEtp(o, ph, false);
    AddDispatch(o, ph, false, true);
    o.push_back(Mem(OpKind::kPermute, ph, 2 * e_ * k * r.tokens * hd));
    o.push_back(Gemm(OpKind::kRouter, ph, {{Tl, h_, E, 1}, {E, h_, Tl, 1}}, 8.0 * r.tokens * static_cast<double>(E),
                     m_.router == RouterKind::kSigmoid ? 4 : 3));
  }

  std::vector<OpSpec> LayerFwd(Phase ph) const {
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    const CollectiveKind out_coll = k_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
    std::vector<OpSpec> o;
    o.push_back(Mem(OpKind::kAttnNorm, ph, 2 * e_ * sT_ * h_));
    AmaxReduceBeforeGather(o, ph);
    if (k_.sequence_parallel) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Qkv(ph, false));
    o.push_back(AttnCore(ph, false));
    // The attention's residual join: after the output GEMM (its bias + dropout + add), or inside
    // the MLP norm's kernel, which then reads the branch and the residual and writes the sum and
    // the normalized rows (our executor).
    const bool join_in_norm = impl_.residual_join_in_norm.value;
    if (join_in_norm) {
      o.push_back(Gemm(OpKind::kAttnOut, ph, {{T_, h_, m_.attn_out_dim() / t_, 1}}));
    } else {
      o.push_back(Gemm(OpKind::kAttnOut, ph, {{T_, h_, m_.attn_out_dim() / t_, 1}}, ResidualBytes(false), ResidualKernels()));
    }
    AddTp(o, out_coll, ph, e_ * Th);
    o.push_back(Mem(OpKind::kMlpNorm, ph, (join_in_norm ? 4 : 2) * e_ * sT_ * h_));
    if (!moe_) {
      MlpFwd(o, ph, m_.ffn_hidden);
      return o;
    }
    if (m_.shared_experts > 0) MlpFwd(o, ph, m_.shared_experts * m_.moe_ffn_hidden);
    RoutedFwd(o, ph);
    return o;
  }

  std::vector<OpSpec> LayerBwd() const {
    const Phase ph = Phase::kBwd;
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    const bool sp = k_.sequence_parallel;
    std::vector<OpSpec> o;
    if (k_.recompute == Recompute::kFull) {
      o = LayerFwd(Phase::kRecompute);
    } else if (k_.recompute == Recompute::kSelective) {
      // Megatron-Core's --recompute-modules: each selected module's forward again, before its backward.
      const uint32_t redo = k_.selective_modules;
      if ((redo & kRecomputeCoreAttn) != 0) o.push_back(AttnCore(Phase::kRecompute, false));
      if ((redo & kRecomputeLayernorm) != 0) {
        o.push_back(Mem(OpKind::kAttnNorm, Phase::kRecompute, 2 * e_ * sT_ * h_));
        o.push_back(Mem(OpKind::kMlpNorm, Phase::kRecompute, 2 * e_ * sT_ * h_));
      }
      if (moe_ && (redo & kRecomputeMoeAct) != 0) o.push_back(ExpertActFwd(Phase::kRecompute));
      if (m_.mla() && (redo & kRecomputeMlaUpProj) != 0) o.push_back(MlaUpProjFwd());
      if (!moe_ && (redo & kRecomputeMlp) != 0) MlpFwd(o, Phase::kRecompute, m_.ffn_hidden);
    }
    if (!moe_) {
      MlpBwd(o, m_.ffn_hidden);
    } else {
      RoutedBwd(o);
      if (m_.shared_experts > 0) MlpBwd(o, m_.shared_experts * m_.moe_ffn_hidden);
    }
    o.push_back(Mem(OpKind::kMlpNorm, ph, 4 * e_ * sT_ * h_));
    AmaxReduceBeforeGather(o, ph);
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    const int64_t ao = m_.attn_out_dim() / t_;
    o.push_back(Gemm(OpKind::kAttnOut, ph, {{T_, ao, h_, 1}, {ao, h_, T_, 1}}, ResidualBytes(true),
                     ResidualKernels()));
    o.push_back(AttnCore(ph, true));
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);  // QKV input again (as fc1's)
    o.push_back(Qkv(ph, true));
    AddTp(o, sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, ph, e_ * Th);
    o.push_back(Mem(OpKind::kAttnNorm, ph, 4 * e_ * sT_ * h_));
    return o;
  }

  UnitOpSpecs Embedding() const {
    UnitOpSpecs u;
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    // Vocab-parallel lookup (+ learned positions, dropout), then the TP all-reduce of the partial rows.
    u.fwd.push_back(Mem(OpKind::kEmbedding, Phase::kFwd, (3 * e_ + drop_) * Th));
    AddTp(u.fwd, k_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, Phase::kFwd,
          e_ * Th);
    // Backward of the SP reduce-scatter is an all-gather of the output gradient.
    if (k_.sequence_parallel) AddTp(u.bwd, CollectiveKind::kAllGather, Phase::kBwd, e_ * Th);
    u.bwd.push_back(Mem(OpKind::kEmbedding, Phase::kBwd, (3 * e_ + drop_) * Th));
    return u;
  }

  //! UnitOpSpecs::grad_sync: one TP all-reduce per whole-held parameter of `elements` entries (in
  //! the executor's order: transformer_layer.cpp LayerSpecs ln1_w, ln1_b, bo, ln2_w, ln2_b, b2;
  //! embedding_head.cpp position_embedding; final_norm_w, final_norm_b), each the parameter's
  //! gradient in the profile's buffer dtype. None without tensor parallelism.
  std::vector<OpSpec> GradSync(const std::vector<int64_t>& elements) const {
    const double g = impl_.grad_buffer_dtype.value == GradDType::kFp32 ? 4.0 : e_;
    std::vector<OpSpec> out;
    for (int64_t n : elements) AddTp(out, CollectiveKind::kAllReduce, Phase::kBwd, g * static_cast<double>(n));
    return out;
  }

  //! A multi-token-prediction module outside its layer and head (Megatron-Core
  //! multi_token_prediction.py _concat_embeddings): enorm on the shifted tokens' embedding and hnorm
  //! on the hidden states (one op, two kernels), the two concatenated to [T, 2h] (read and write),
  //! eh_proj, a column-parallel 2h -> h/tp GEMM whose input sequence parallelism gathers first, and
  //! its output gathered over tp along the hidden dimension (gather_from_tensor_model_parallel_region)
  //! before sequence parallelism scatters it again (a slice, no exchange). Backward: the gather's
  //! backward is a slice; the scatter's is an all-gather (SP); the GEMM's (dX, dW); its input
  //! gradient reduced over tp (reduce-scatter with SP, else all-reduce) as a column-parallel linear's;
  //! the concatenation's backward views its halves; the norms' backward.
  std::vector<OpSpec> MtpOwnFwd(Phase ph) const {
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    std::vector<OpSpec> o;
    o.push_back(Mem(OpKind::kMtpNorm, ph, 2 * 2 * e_ * sT_ * h_, 2));
    AmaxReduceBeforeGather(o, ph);
    if (k_.sequence_parallel) AddTp(o, CollectiveKind::kAllGather, ph, 2 * e_ * Th);
    o.push_back(Gemm(OpKind::kMtpProj, ph, {{T_, h_ / t_, 2 * h_, 1}}, 4 * e_ * sT_ * h_, 1));
    AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    return o;
  }
  std::vector<OpSpec> MtpOwnBwd() const {
    const Phase ph = Phase::kBwd;
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    const bool sp = k_.sequence_parallel;
    std::vector<OpSpec> o;
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    AmaxReduceBeforeGather(o, ph);
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, 2 * e_ * Th);  // the GEMM's input again
    o.push_back(Gemm(OpKind::kMtpProj, ph, {{T_, 2 * h_, h_ / t_, 1}, {h_ / t_, 2 * h_, T_, 1}}));
    AddTp(o, sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, ph, 2 * e_ * Th);
    o.push_back(Mem(OpKind::kMtpNorm, ph, 2 * 4 * e_ * sT_ * h_, 2));
    return o;
  }

  //! OpCatalogue::mtp: the embedding lookup, the module's own ops, its transformer layer (the kind
  //! SetKind last chose), and the head; backward in reverse, with the layer's recompute, and under
  //! full recompute the module's own forward again (its _checkpointed_forward recomputes the
  //! projection with the layer).
  UnitOpSpecs Mtp(const UnitOpSpecs& embedding, const UnitOpSpecs& head) const {
    UnitOpSpecs u;
    u.fwd = embedding.fwd;
    for (auto& ops : {MtpOwnFwd(Phase::kFwd), LayerFwd(Phase::kFwd), head.fwd}) u.fwd.insert(u.fwd.end(), ops.begin(), ops.end());
    u.bwd = head.bwd;
    if (k_.recompute == Recompute::kFull) {
      const std::vector<OpSpec> redo = MtpOwnFwd(Phase::kRecompute);
      u.bwd.insert(u.bwd.end(), redo.begin(), redo.end());
    }
    for (auto& ops : {LayerBwd(), MtpOwnBwd(), embedding.bwd}) u.bwd.insert(u.bwd.end(), ops.begin(), ops.end());
    return u;
  }

  UnitOpSpecs Head() const {
    UnitOpSpecs u;
    const int64_t v = m_.vocab;
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    const double Tv = static_cast<double>(T_) * static_cast<double>(PerRank(v, t_));
    const bool sp = k_.sequence_parallel;
    u.fwd.push_back(Mem(OpKind::kFinalNorm, Phase::kFwd, 2 * e_ * sT_ * h_));
    if (sp) AddTp(u.fwd, CollectiveKind::kAllGather, Phase::kFwd, e_ * Th);
    u.fwd.push_back(Gemm(OpKind::kLmHead, Phase::kFwd, {{T_, v / t_, h_, 1}}));
    // Vocab-parallel cross-entropy, then its shards' statistics combined: Megatron all-reduces the
    // row max, target logits and sums of exponentials (between its passes; priced after them, as one
    // op); our executor all-gathers each shard's [row max | sum_exp | target logit] once.
    const LossTraffic loss = LossBytesPerLogit();
    u.fwd.push_back(Mem(OpKind::kLoss, Phase::kFwd, loss.fwd * Tv, loss.fwd_kernels));
    if (impl_.loss_reduction.value == LossReduction::kAllGather) {
      AddTp(u.fwd, CollectiveKind::kAllGather, Phase::kFwd, 3 * 4 * static_cast<double>(T_) * static_cast<double>(t_));
    } else {
      AddTp(u.fwd, CollectiveKind::kAllReduce, Phase::kFwd, 3 * 4 * static_cast<double>(T_));
    }
    u.bwd.push_back(Mem(OpKind::kLoss, Phase::kBwd, loss.bwd * Tv, loss.bwd_kernels));
    u.bwd.push_back(Gemm(OpKind::kLmHead, Phase::kBwd, {{T_, h_, v / t_, 1}, {v / t_, h_, T_, 1}}));
    AddTp(u.bwd, sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, Phase::kBwd, e_ * Th);
    u.bwd.push_back(Mem(OpKind::kFinalNorm, Phase::kBwd, 4 * e_ * sT_ * h_));
    return u;
  }

 private:
  const ModelSpec& m_;
  const OpShapeKey& k_;
  const ImplementationProfile& impl_;
  int64_t s_ = 0, T_ = 0, t_ = 1, h_ = 0;
  double e_ = 2, sT_ = 0, drop_ = 0;  // drop_: 1 when the model asks for dropout and the implementation applies it
  bool flash_ = false;
  bool accumulate_wgrad_ = false;  // GemmShape::accumulate on backward weight gradients
  bool moe_ = false, local_ = false;  // the kind of layer being built (SetKind)
  int64_t keys_ = 0;                  // keys a query attends over in that kind
};

}  // namespace

int LayerKindOf(const ModelSpec& m, int64_t layer) {
  return (IsMoeLayer(m, layer) ? 1 : 0) + (IsLocalAttentionLayer(m, layer) ? 2 : 0);
}

std::optional<std::string> CatalogueMismatch(const CostDb& db) {
  if (db.catalogue == kOpCatalogueVersion || (db.gemms.empty() && db.kernels.empty())) return std::nullopt;
  const std::string was = db.catalogue == 0 ? "an unstamped op catalogue (before version 1)"
                                            : "op catalogue version " + std::to_string(db.catalogue);
  return "measured under " + was + ", this build counts ops as version " + std::to_string(kOpCatalogueVersion) +
         ": samples keyed by bytes or GEMM kind may be read at other sizes; run `parallax calibrate` again";
}

std::vector<int64_t> LayerGradSyncElements(const ModelSpec& m, bool moe, bool sequence_parallel) {
  const int64_t h = m.hidden;
  const bool norm_bias = m.norm == NormKind::kLayerNorm && m.bias;
  std::vector<int64_t> out;
  if (sequence_parallel) {
    out.push_back(h);
    if (norm_bias) out.push_back(h);
  }
  if (m.mla()) {  // q_down, q_norm (with the query latent), kv_down, k_rope, kv_norm
    if (m.q_lora_rank > 0) out.insert(out.end(), {m.q_lora_rank * h, m.q_lora_rank});
    out.insert(out.end(), {m.kv_lora_rank * h, m.qk_rope_head_dim * h, m.kv_lora_rank});
  }
  if (sequence_parallel) {
    if (m.bias) out.push_back(h);  // attention output bias (row-parallel)
    out.push_back(h);
    if (norm_bias) out.push_back(h);
  }
  if (moe) out.push_back(m.experts * h);  // the router
  if (sequence_parallel && m.bias) out.push_back(h);  // fc2 bias
  return out;
}

OpCatalogue BuildOpCatalogue(const ModelSpec& model, const OpShapeKey& key, const ImplementationProfile& impl) {
  Catalogue c(model, key, impl);
  OpCatalogue out;
  out.kinds.resize(kLayerKinds);
  for (int64_t i = 0; i < model.layers; ++i) {
    UnitOpSpecs& u = out.kinds[static_cast<size_t>(LayerKindOf(model, i))];
    if (!u.fwd.empty()) continue;
    c.SetKind(LayerKindOf(model, i));
    u.fwd = c.LayerFwd(Phase::kFwd);
    u.bwd = c.LayerBwd();
  }
  out.embedding = c.Embedding();
  out.head = c.Head();
  if (model.mtp_layers > 0) {
    c.SetKind(LayerKindOf(model, model.layers - 1));
    out.mtp = c.Mtp(out.embedding, out.head);
  }
  c.SetKind(LayerKindOf(model, 0));
  out.layer.fwd = c.LayerFwd(Phase::kFwd);
  out.layer.bwd = c.LayerBwd();
  for (int kind = 0; kind < kLayerKinds; ++kind) {
    UnitOpSpecs& u = out.kinds[static_cast<size_t>(kind)];
    if (!u.fwd.empty()) u.grad_sync = c.GradSync(LayerGradSyncElements(model, kind % 2 == 1, key.sequence_parallel));
  }
  out.layer.grad_sync = out.kinds[static_cast<size_t>(LayerKindOf(model, 0))].grad_sync;
  const bool norm_bias = model.norm == NormKind::kLayerNorm && model.bias;
  if (key.sequence_parallel) {
    const int64_t h = model.hidden;
    // Learned positions: our executor adds them to its sequence shard (each rank's gradient is
    // partial); Megatron adds them before scattering the sequence, so its gradient is whole.
    if (model.position == PositionKind::kLearned && impl.sp_grad_reduction.value == SpGradReduction::kPerParameter) {
      out.embedding.grad_sync = c.GradSync({model.seq_len * h});
    }
    out.head.grad_sync = c.GradSync(norm_bias ? std::vector<int64_t>{h, h} : std::vector<int64_t>{h});
  }
  if (model.mtp_layers > 0) {
    // Its layer's whole-held parameters, then (with sequence parallelism) its three norms' weights
    // (enorm, hnorm, final_layernorm; and their biases with LayerNorm + bias).
    std::vector<int64_t> elements =
        LayerGradSyncElements(model, IsMoeLayer(model, model.layers - 1), key.sequence_parallel);
    if (key.sequence_parallel) elements.insert(elements.end(), norm_bias ? 6 : 3, model.hidden);
    out.mtp.grad_sync = c.GradSync(elements);
  }
  return out;
}

std::optional<OpSpec> OpCatalogueEntry(const OpCatalogue& c, OpKind op, Phase phase, bool in_layer) {
  const std::array<const UnitOpSpecs*, 2> outer{&c.embedding, &c.head};
  auto find = [&](const UnitOpSpecs& u) -> std::optional<OpSpec> {
    for (const auto* list : {&u.fwd, &u.bwd}) {
      for (const OpSpec& o : *list) {
        if (o.op == op && o.phase == phase) return o;
      }
    }
    return std::nullopt;
  };
  if (in_layer) return find(c.layer);
  for (const auto* u : outer) {
    if (auto o = find(*u)) return o;
  }
  return std::nullopt;
}

}  // namespace parallax
