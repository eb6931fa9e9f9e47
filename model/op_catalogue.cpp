#include "model/op_catalogue.h"

#include <algorithm>
#include <array>

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
        cast_bytes += 4.0 * static_cast<double>(g.m) * static_cast<double>(g.k);
        ++casts;
      }
    }
    o.executed_flops = o.flops;
    o.bytes = extra_bytes + cast_bytes;
    o.kernels += (extra_bytes > 0 ? extra_kernels : 0) + casts;
    return o;
  }
  //! The linear layers Transformer Engine runs in FP8 (te.Linear / LayerNormLinear / LayerNormMLP
  //! inside the layer; the embedding and the LM head stay 16-bit).
  static bool IsLinear(OpKind op) {
    return op == OpKind::kQkv || op == OpKind::kAttnOut || op == OpKind::kFc1 || op == OpKind::kFc2;
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
    const double scores = static_cast<double>(batch) * s_ * s_;
    if (flash_) {
      // One fused kernel (three with FA2's backward preprocessing and dQ conversion); only Q, K,
      // V, O (and their gradients) touch HBM. Full-square FLOPs by convention; causal executes
      // the blocks on and below the diagonal (~half).
      OpSpec o;
    o.op = OpKind::kAttnCore;
    o.phase = ph;
      o.flash = FlashShape{batch, s_, s_, d, true, bwd};
      const double square = 4.0 * scores * static_cast<double>(d);  // QK^T + AV
      o.flops = bwd ? 2 * square : square;
      const double causal = 0.5 + 0.5 / static_cast<double>(std::max<int64_t>(s_ / 128, 1));
      o.executed_flops = (bwd ? 2.5 : 1.0) * square * causal;  // backward recomputes QK^T
      const double qkvo = 4.0 * e_ * static_cast<double>(T_) * static_cast<double>(PerRank(h_, t_));
      o.bytes = bwd ? 2 * qkvo : qkvo;
      o.kernels = bwd ? 3 : 1;
      return o;
    }
    // Unfused (Megatron-LM 2021): QK^T batched GEMM, fused scale-mask-softmax (+ dropout) over the
    // s x s scores in HBM, AV batched GEMM.
    if (!bwd) {
      return Gemm(OpKind::kAttnCore, ph, {{s_, s_, d, batch}, {s_, d, s_, batch}},
                  scores * (2 * e_ + drop_ * (2 * e_ + 1)), drop_ > 0 ? 2 : 1);
    }
    return Gemm(OpKind::kAttnCore, ph, {{s_, d, s_, batch}, {s_, d, s_, batch}, {s_, s_, d, batch}, {s_, d, s_, batch}},
                scores * (3 * e_ + drop_ * (2 * e_ + 1)), drop_ > 0 ? 2 : 1);
  }

  // The QKV projection. Fused (Megatron): one GEMM against the concatenated weight, bias in its
  // epilogue. Unfused (our executor): one GEMM per projection, each followed by its bias add, and
  // the rotary embedding of q and k in the same op; backward: per projection dX and dW, the bias
  // gradient (a column sum of dY), and the inverse rotation of dq and dk first.
  OpSpec Qkv(Phase ph, bool bwd) const {
    const int64_t q = h_ / t_, kv = m_.kv_dim() / t_;
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

  std::vector<OpSpec> LayerFwd(Phase ph) const {
    const int64_t f = m_.ffn_hidden;
    const int64_t fin = m_.mlp == MlpKind::kSwiglu ? 2 * f : f;
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    const CollectiveKind out_coll = k_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
    const bool fused_act = impl_.fused_bias_activation.value;
    std::vector<OpSpec> o;
    o.push_back(Mem(OpKind::kAttnNorm, ph, 2 * e_ * sT_ * h_));
    if (k_.sequence_parallel) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Qkv(ph, false));
    o.push_back(AttnCore(ph, false));
    // The attention's residual join: after the output GEMM (its bias + dropout + add), or inside
    // the MLP norm's kernel, which then reads the branch and the residual and writes the sum and
    // the normalized rows (our executor).
    const bool join_in_norm = impl_.residual_join_in_norm.value;
    if (join_in_norm) {
      o.push_back(Gemm(OpKind::kAttnOut, ph, {{T_, h_, h_ / t_, 1}}));
    } else {
      o.push_back(Gemm(OpKind::kAttnOut, ph, {{T_, h_, h_ / t_, 1}}, ResidualBytes(false), ResidualKernels()));
    }
    AddTp(o, out_coll, ph, e_ * Th);
    o.push_back(Mem(OpKind::kMlpNorm, ph, (join_in_norm ? 4 : 2) * e_ * sT_ * h_));
    if (k_.sequence_parallel) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Gemm(OpKind::kFc1, ph, {{T_, fin / t_, h_, 1}}));
    // Bias + activation: read and write the fc1 output once when fused, twice when not.
    const double act = (m_.mlp == MlpKind::kSwiglu ? 3 : 2) * e_ * static_cast<double>(T_) * static_cast<double>(PerRank(f, t_));
    o.push_back(Mem(OpKind::kAct, ph, fused_act || !m_.bias ? act : 2 * act, fused_act || !m_.bias ? 1 : 2));
    o.push_back(Gemm(OpKind::kFc2, ph, {{T_, h_, f / t_, 1}}, ResidualBytes(false), ResidualKernels()));
    AddTp(o, out_coll, ph, e_ * Th);
    return o;
  }

  std::vector<OpSpec> LayerBwd() const {
    const Phase ph = Phase::kBwd;
    const int64_t f = m_.ffn_hidden;
    const int64_t fin = m_.mlp == MlpKind::kSwiglu ? 2 * f : f;
    const double Th = static_cast<double>(T_) * static_cast<double>(h_);
    const bool sp = k_.sequence_parallel;
    const bool fused_act = impl_.fused_bias_activation.value;
    std::vector<OpSpec> o;
    if (k_.recompute == Recompute::kFull) {
      o = LayerFwd(Phase::kRecompute);
    } else if (k_.recompute == Recompute::kSelective) {
      o.push_back(AttnCore(Phase::kRecompute, false));
    }
    // Backward of a reduce-scatter is an all-gather (SP); of an all-reduce "g", the identity.
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Gemm(OpKind::kFc2, ph, {{T_, f / t_, h_, 1}, {f / t_, h_, T_, 1}}, ResidualBytes(true), ResidualKernels()));
    const double act = (m_.mlp == MlpKind::kSwiglu ? 5 : 3) * e_ * static_cast<double>(T_) * static_cast<double>(PerRank(f, t_));
    o.push_back(Mem(OpKind::kAct, ph, fused_act || !m_.bias ? act : 1.5 * act, fused_act || !m_.bias ? 1 : 2));
    // SP keeps fc1's input sharded and gathers it again for the weight gradient (Korthikanti et al.
    // 2022, section 4.2.2); counted exposed, as the executor runs it.
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Gemm(OpKind::kFc1, ph, {{T_, h_, fin / t_, 1}, {fin / t_, h_, T_, 1}}));
    AddTp(o, sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, ph, e_ * Th);
    o.push_back(Mem(OpKind::kMlpNorm, ph, 4 * e_ * sT_ * h_));
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * Th);
    o.push_back(Gemm(OpKind::kAttnOut, ph, {{T_, h_ / t_, h_, 1}, {h_ / t_, h_, T_, 1}}, ResidualBytes(true),
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
};

}  // namespace

std::optional<std::string> CatalogueMismatch(const CostDb& db) {
  if (db.catalogue == kOpCatalogueVersion || (db.gemms.empty() && db.kernels.empty())) return std::nullopt;
  const std::string was = db.catalogue == 0 ? "an unstamped op catalogue (before version 1)"
                                            : "op catalogue version " + std::to_string(db.catalogue);
  return "measured under " + was + ", this build counts ops as version " + std::to_string(kOpCatalogueVersion) +
         ": samples keyed by bytes or GEMM kind may be read at other sizes; run `parallax calibrate` again";
}

OpCatalogue BuildOpCatalogue(const ModelSpec& model, const OpShapeKey& key, const ImplementationProfile& impl) {
  Catalogue c(model, key, impl);
  OpCatalogue out;
  out.layer.fwd = c.LayerFwd(Phase::kFwd);
  out.layer.bwd = c.LayerBwd();
  out.embedding = c.Embedding();
  out.head = c.Head();
  if (key.sequence_parallel) {
    const int64_t h = model.hidden;
    const bool norm_bias = model.norm == NormKind::kLayerNorm && model.bias;
    std::vector<int64_t> layer = {h};
    if (norm_bias) layer.push_back(h);
    if (model.bias) layer.push_back(h);  // attention output bias (row-parallel)
    layer.push_back(h);
    if (norm_bias) layer.push_back(h);
    if (model.bias) layer.push_back(h);  // fc2 bias
    out.layer.grad_sync = c.GradSync(layer);
    // Learned positions: our executor adds them to its sequence shard (each rank's gradient is
    // partial); Megatron adds them before scattering the sequence, so its gradient is whole.
    if (model.position == PositionKind::kLearned && impl.sp_grad_reduction.value == SpGradReduction::kPerParameter) {
      out.embedding.grad_sync = c.GradSync({model.seq_len * h});
    }
    out.head.grad_sync = c.GradSync(norm_bias ? std::vector<int64_t>{h, h} : std::vector<int64_t>{h});
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
