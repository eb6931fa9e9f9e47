#include "planner/cost/layer_ops.h"

namespace parallax::planner {

void UnitOps::Finish() {
  fwd_s = bwd_s = fwd_tp_s = bwd_tp_s = fwd_flops = bwd_flops = 0;
  for (const auto& o : fwd) {
    fwd_s += o.time_s;
    fwd_flops += o.flops;
    if (o.tp_comm) fwd_tp_s += o.time_s;
  }
  for (const auto& o : bwd) {
    bwd_s += o.time_s;
    bwd_flops += o.flops;
    if (o.tp_comm) bwd_tp_s += o.time_s;
  }
}

namespace {

class Builder {
 public:
  Builder(const ModelSpec& m, const UnitKey& k, const ComputeModel& c, const CollectiveModel& coll,
          const PlacedGroup& tp)
      : m_(m), k_(k), c_(c), coll_(coll), tp_(tp) {
    s_ = static_cast<double>(k.seq_len > 0 ? k.seq_len : m.seq_len);
    T_ = static_cast<double>(k.micro_batch) * s_;
    t_ = static_cast<double>(k.tp);
    h_ = static_cast<double>(m.hidden);
    e_ = static_cast<double>(c.element_bytes());
    sT_ = k.sequence_parallel ? T_ / t_ : T_;
    drop_ = m.dropout ? 1.0 : 0.0;
  }

  //! Several GEMMs as one op; shapes are (m, n, k, batch).
  CostedOp Gemm(OpKind op, Phase ph, std::initializer_list<std::array<double, 4>> shapes, double extra_bytes = 0,
                const char* extra_kind = "") const {
    CostedOp o{op, ph};
    for (const auto& g : shapes) {
      GemmPart part{static_cast<int64_t>(g[0]), static_cast<int64_t>(g[1]), static_cast<int64_t>(g[2]),
                    static_cast<int64_t>(g[3])};
      part.time_s = c_.Gemm(part.m, part.n, part.k, part.batch);
      o.time_s += part.time_s;
      o.flops += 2.0 * g[0] * g[1] * g[2] * g[3];
      o.gemms.push_back(part);
    }
    if (extra_bytes > 0) {
      o.memory_family = extra_kind;
      o.memory_time_s = c_.MemoryBound(extra_kind, extra_bytes);
      o.time_s += o.memory_time_s;
      o.bytes += extra_bytes;
    }
    return o;
  }
  CostedOp Mem(OpKind op, Phase ph, double bytes) const {
    CostedOp o{op, ph};
    o.bytes = bytes;
    o.memory_family = ToString(op);
    o.memory_time_s = c_.MemoryBound(o.memory_family, bytes);
    o.time_s = o.memory_time_s;
    return o;
  }
  CostedOp Tp(CollectiveKind kind, Phase ph, double bytes) const {
    const OpKind op = kind == CollectiveKind::kAllGather       ? OpKind::kTpAllGather
                      : kind == CollectiveKind::kReduceScatter ? OpKind::kTpReduceScatter
                                                               : OpKind::kTpAllReduce;
    CostedOp o{op, ph};
    o.bytes = bytes;
    o.time_s = coll_.Time(kind, bytes, tp_);
    o.tp_comm = true;
    return o;
  }
  void AddTp(std::vector<CostedOp>& out, CollectiveKind kind, Phase ph, double bytes) const {
    if (k_.tp > 1) out.push_back(Tp(kind, ph, bytes));
  }

  // Attention core forward: QK^T, scale-mask-softmax (+ dropout), AV over b * heads/t batches.
  CostedOp AttnCoreFwd(Phase ph) const {
    const double d = static_cast<double>(m_.head_dim());
    const double batch = static_cast<double>(k_.micro_batch) * static_cast<double>(m_.heads) / t_;
    const double scores = batch * s_ * s_;
    const double softmax_bytes = scores * (2 * e_ + drop_ * (2 * e_ + 1));
    return Gemm(OpKind::kAttnCore, ph, {{s_, s_, d, batch}, {s_, d, s_, batch}}, softmax_bytes, "attn_core");
  }

  std::vector<CostedOp> LayerFwd(Phase ph) const {
    const double kv = static_cast<double>(m_.kv_dim());
    const double f = static_cast<double>(m_.ffn_hidden);
    const double fin = m_.mlp == MlpKind::kSwiglu ? 2 * f : f;
    const double residual = (3 * e_ + drop_) * sT_ * h_;  // bias-dropout-add of a row-parallel output
    const CollectiveKind out_coll = k_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
    std::vector<CostedOp> o;
    o.push_back(Mem(OpKind::kAttnNorm, ph, 2 * e_ * sT_ * h_));
    if (k_.sequence_parallel) AddTp(o, CollectiveKind::kAllGather, ph, e_ * T_ * h_);
    o.push_back(Gemm(OpKind::kQkv, ph, {{T_, (h_ + 2 * kv) / t_, h_, 1}}));
    o.push_back(AttnCoreFwd(ph));
    o.push_back(Gemm(OpKind::kAttnOut, ph, {{T_, h_, h_ / t_, 1}}, residual, "attn_out"));
    AddTp(o, out_coll, ph, e_ * T_ * h_);
    o.push_back(Mem(OpKind::kMlpNorm, ph, 2 * e_ * sT_ * h_));
    if (k_.sequence_parallel) AddTp(o, CollectiveKind::kAllGather, ph, e_ * T_ * h_);
    o.push_back(Gemm(OpKind::kFc1, ph, {{T_, fin / t_, h_, 1}}));
    o.push_back(Mem(OpKind::kAct, ph, (m_.mlp == MlpKind::kSwiglu ? 3 : 2) * e_ * T_ * f / t_));
    o.push_back(Gemm(OpKind::kFc2, ph, {{T_, h_, f / t_, 1}}, residual, "fc2"));
    AddTp(o, out_coll, ph, e_ * T_ * h_);
    return o;
  }

  std::vector<CostedOp> LayerBwd() const {
    const Phase ph = Phase::kBwd;
    const double kv = static_cast<double>(m_.kv_dim());
    const double f = static_cast<double>(m_.ffn_hidden);
    const double fin = m_.mlp == MlpKind::kSwiglu ? 2 * f : f;
    const double d = static_cast<double>(m_.head_dim());
    const double batch = static_cast<double>(k_.micro_batch) * static_cast<double>(m_.heads) / t_;
    const double scores = batch * s_ * s_;
    const double residual_bwd = (2 * e_ + drop_) * sT_ * h_;  // dropout backward + residual grad
    const bool sp = k_.sequence_parallel;
    std::vector<CostedOp> o;
    if (k_.recompute == Recompute::kFull) {
      o = LayerFwd(Phase::kRecompute);
    } else if (k_.recompute == Recompute::kSelective) {
      o.push_back(AttnCoreFwd(Phase::kRecompute));
    }
    // Backward of a reduce-scatter is an all-gather (SP); of an all-reduce "g", the identity.
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * T_ * h_);
    o.push_back(Gemm(OpKind::kFc2, ph, {{T_, f / t_, h_, 1}, {f / t_, h_, T_, 1}}, residual_bwd, "fc2"));
    o.push_back(Mem(OpKind::kAct, ph, (m_.mlp == MlpKind::kSwiglu ? 5 : 3) * e_ * T_ * f / t_));
    // SP keeps fc1's input sharded and gathers it again for the weight gradient (Korthikanti et al.
    // 2022, section 4.2.2); counted exposed, as the executor runs it.
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * T_ * h_);
    o.push_back(Gemm(OpKind::kFc1, ph, {{T_, h_, fin / t_, 1}, {fin / t_, h_, T_, 1}}));
    AddTp(o, sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, ph, e_ * T_ * h_);
    o.push_back(Mem(OpKind::kMlpNorm, ph, 4 * e_ * sT_ * h_));
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * T_ * h_);
    o.push_back(Gemm(OpKind::kAttnOut, ph, {{T_, h_ / t_, h_, 1}, {h_ / t_, h_, T_, 1}}, residual_bwd, "attn_out"));
    o.push_back(Gemm(OpKind::kAttnCore, ph, {{s_, d, s_, batch}, {s_, d, s_, batch}, {s_, s_, d, batch}, {s_, d, s_, batch}},
                     scores * (3 * e_ + drop_ * (2 * e_ + 1)), "attn_core"));
    if (sp) AddTp(o, CollectiveKind::kAllGather, ph, e_ * T_ * h_);  // QKV input again (as fc1's)
    o.push_back(Gemm(OpKind::kQkv, ph, {{T_, h_, (h_ + 2 * kv) / t_, 1}, {(h_ + 2 * kv) / t_, h_, T_, 1}}));
    AddTp(o, sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, ph, e_ * T_ * h_);
    o.push_back(Mem(OpKind::kAttnNorm, ph, 4 * e_ * sT_ * h_));
    return o;
  }

  UnitOps Embedding() const {
    UnitOps u;
    // Vocab-parallel lookup (+ learned positions, dropout), then the TP all-reduce of the partial rows.
    u.fwd.push_back(Mem(OpKind::kEmbedding, Phase::kFwd, (3 * e_ + drop_) * T_ * h_));
    AddTp(u.fwd, k_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, Phase::kFwd,
          e_ * T_ * h_);
    // Backward of the SP reduce-scatter is an all-gather of the output gradient.
    if (k_.sequence_parallel) AddTp(u.bwd, CollectiveKind::kAllGather, Phase::kBwd, e_ * T_ * h_);
    u.bwd.push_back(Mem(OpKind::kEmbedding, Phase::kBwd, (3 * e_ + drop_) * T_ * h_));
    u.Finish();
    return u;
  }

  UnitOps Head() const {
    UnitOps u;
    const double v = static_cast<double>(m_.vocab);
    const bool sp = k_.sequence_parallel;
    u.fwd.push_back(Mem(OpKind::kFinalNorm, Phase::kFwd, 2 * e_ * sT_ * h_));
    if (sp) AddTp(u.fwd, CollectiveKind::kAllGather, Phase::kFwd, e_ * T_ * h_);
    u.fwd.push_back(Gemm(OpKind::kLmHead, Phase::kFwd, {{T_, v / t_, h_, 1}}));
    // Vocab-parallel cross-entropy: logits read twice, fp32 softmax written; max/sum/target all-reduces.
    u.fwd.push_back(Mem(OpKind::kLoss, Phase::kFwd, (2 * e_ + 4) * T_ * v / t_));
    AddTp(u.fwd, CollectiveKind::kAllReduce, Phase::kFwd, 3 * 4 * T_);
    u.bwd.push_back(Mem(OpKind::kLoss, Phase::kBwd, (4 + e_) * T_ * v / t_));
    u.bwd.push_back(Gemm(OpKind::kLmHead, Phase::kBwd, {{T_, h_, v / t_, 1}, {v / t_, h_, T_, 1}}));
    AddTp(u.bwd, sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, Phase::kBwd, e_ * T_ * h_);
    u.bwd.push_back(Mem(OpKind::kFinalNorm, Phase::kBwd, 4 * e_ * sT_ * h_));
    u.Finish();
    return u;
  }

 private:
  const ModelSpec& m_;
  const UnitKey& k_;
  const ComputeModel& c_;
  const CollectiveModel& coll_;
  const PlacedGroup& tp_;
  double s_ = 0, T_ = 0, t_ = 1, h_ = 0, e_ = 2, sT_ = 0, drop_ = 0;
};

}  // namespace

UnitCosts BuildUnitCosts(const ModelSpec& model, const UnitKey& key, const ComputeModel& compute,
                         const CollectiveModel& collectives, const PlacedGroup& tp_group) {
  Builder b(model, key, compute, collectives, tp_group);
  UnitCosts u;
  u.layer.fwd = b.LayerFwd(Phase::kFwd);
  u.layer.bwd = b.LayerBwd();
  u.layer.Finish();
  u.embedding = b.Embedding();
  u.head = b.Head();
  return u;
}

}  // namespace parallax::planner
