#include "profiler/calibrate/calibration_set.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "model/implementation.h"
#include "model/op_catalogue.h"
#include "model/presets.h"
#include "planner/cost/layer_ops.h"

namespace parallax::profiler {
namespace {

using executor::Trans;

//! The shapes the planner searches (planner/search/search.cpp): tp divides the ranks of a node
//! and the heads, kv heads and ffn; micro-batch 1..32; sequence parallel when tp > 1 divides seq.
struct ShapeKey {
  int64_t tp = 1, micro_batch = 1;
  bool sp = false;
};

std::vector<ShapeKey> SearchedKeys(const ModelSpec& m, int64_t ranks_per_node, bool quick) {
  // Micro-batches beyond this many tokens are clamped to the largest measured (the planner
  // extrapolates from the edge): a CPU cannot time 32 x 2048-token GEMMs in minutes.
  const int64_t max_tokens = quick ? 2048 : 8192;
  std::vector<ShapeKey> out;
  for (int64_t tp = 1; tp <= ranks_per_node; ++tp) {
    if (ranks_per_node % tp != 0 || m.heads % tp != 0 || m.kv_heads % tp != 0 || m.ffn_hidden % tp != 0) continue;
    for (int64_t mb : {1, 2, 4, 8, 16, 32}) {
      if (mb > 1 && mb * m.seq_len > max_tokens) break;
      out.push_back({tp, mb, false});
      if (tp > 1 && m.seq_len % tp == 0) out.push_back({tp, mb, true});
    }
  }
  return out;
}

class Builder {
 public:
  explicit Builder(const CalibrationSetOptions& o) : o_(o) {}

  void AddGemm(int64_t m, int64_t n, int64_t k, int64_t batch, Trans ta, Trans tb, float beta) {
    for (executor::DType d : o_.gemm_dtypes) {
      // A shape the model runs both plainly and accumulating (dW += dY^T X, fp32 C) is two probes.
      if (!gemm_seen_.insert({m, n, k, batch, static_cast<int>(d), beta != 0}).second) continue;
      ProbeShape p;
      p.kind = ProbeKind::kGemm;
      p.dtype = d;
      p.m = m;
      p.n = n;
      p.k = k;
      p.batch = batch;
      p.ta = ta;
      p.tb = tb;
      p.beta = beta;
      set_.gemms.push_back({p});
    }
  }

  void AddKernel(const std::string& family, double bytes, ProbeShape p) {
    const auto b = static_cast<int64_t>(bytes);
    if (b <= 0 || !kernel_seen_.insert({family, b}).second) return;
    p.dtype = o_.kernel_dtype;
    set_.kernels.push_back({family, b, p});
  }

  //! Every op of the catalogue of `m` at `key`: its GEMMs, and its memory-bound part or whole
  //! attention with the kernels the executor runs for it (executor/runtime/transformer_layer.cpp,
  //! embedding_head.cpp).
  void AddModel(const ModelSpec& m, const ShapeKey& key) {
    OpShapeKey k;
    k.micro_batch = key.micro_batch;
    k.tp = key.tp;
    k.sequence_parallel = key.sp;
    k.element_bytes = executor::SizeOf(o_.kernel_dtype);
    const ImplementationProfile impl = DefaultImplementation();  // the executor that calibrate times
    const OpCatalogue cat = BuildOpCatalogue(m, k, impl);
    const int64_t T = key.micro_batch * m.seq_len;
    const int64_t Tl = key.sp ? T / key.tp : T;
    // The rank's heads: attention's probes and the QKV epilogue's.
    const executor::AttentionShape heads{key.micro_batch, m.seq_len, m.heads / key.tp, m.kv_heads / key.tp, m.head_dim()};
    for (const UnitOpSpecs* unit : {&cat.layer, &cat.embedding, &cat.head}) {
      for (const auto* list : {&unit->fwd, &unit->bwd}) {
        for (const OpSpec& s : *list) {
          if (s.tp_collective) continue;
          const bool bwd = s.phase == Phase::kBwd;
          if (s.op == OpKind::kAttnCore) {
            ProbeShape p;
            p.kind = bwd ? ProbeKind::kAttentionBwd : ProbeKind::kAttentionFwd;
            p.attention = heads;
            AddKernel(planner::AttentionFamily(s.phase), s.bytes, p);
            continue;
          }
          for (size_t i = 0; i < s.gemms.size(); ++i) {
            const GemmShape& g = s.gemms[i];
            if (!bwd) {
              AddGemm(g.m, g.n, g.k, g.batch, Trans::kNo, Trans::kYes, 0);
            } else if (i % 2 == 0) {
              AddGemm(g.m, g.n, g.k, g.batch, Trans::kNo, Trans::kNo, 0);  // dX = dY W
            } else {
              // dW += dY^T X: accumulating into the fp32 gradient as the catalogue flags it
              AddGemm(g.m, g.n, g.k, g.batch, Trans::kYes, Trans::kNo, g.accumulate ? 1.0f : 0.0f);
            }
          }
          if (s.bytes <= 0 || s.flash) continue;
          ProbeShape p;
          p.rows = Tl;
          p.cols = m.hidden;
          p.rms = m.norm == NormKind::kRmsNorm;
          p.bias = m.bias;
          switch (s.op) {
            case OpKind::kAttnNorm:
            case OpKind::kFinalNorm: p.kind = bwd ? ProbeKind::kNormBwd : ProbeKind::kNormFwd; break;
            case OpKind::kMlpNorm:
              // Our executor joins the attention's residual inside this kernel (the profile's fact).
              p.kind = bwd                                ? ProbeKind::kNormBwd
                       : impl.residual_join_in_norm.value ? ProbeKind::kResidualNormFwd
                                                          : ProbeKind::kNormFwd;
              break;
            case OpKind::kAct:
              p.kind = bwd ? ProbeKind::kActBwd : ProbeKind::kActFwd;
              p.n = T * (m.ffn_hidden / key.tp);
              p.swiglu = m.mlp == MlpKind::kSwiglu;
              break;
            case OpKind::kAttnOut:
            case OpKind::kFc2: p.kind = bwd ? ProbeKind::kResidualBwd : ProbeKind::kResidualFwd; break;
            case OpKind::kQkv:  // an unfused projection's bias adds and rotary embedding
              p.kind = bwd ? ProbeKind::kQkvEpilogueBwd : ProbeKind::kQkvEpilogueFwd;
              p.attention = heads;
              p.rotary = m.position == PositionKind::kRotary;
              break;
            case OpKind::kEmbedding:
              p.kind = bwd ? ProbeKind::kEmbeddingBwd : ProbeKind::kEmbeddingFwd;
              p.rows = T;
              p.vocab_rows = m.vocab / key.tp;
              p.positions = m.position == PositionKind::kLearned;
              break;
            case OpKind::kLoss:
              p.kind = bwd ? ProbeKind::kLossBwd : ProbeKind::kLossFwd;
              p.rows = T;
              p.vocab_rows = m.vocab / key.tp;
              break;
            default: continue;
          }
          AddKernel(planner::MemoryFamily(s.op, s.phase), s.bytes, p);
        }
      }
    }
  }

  //! AdamW (28 B/param, planner/cost/plan_costs.cpp) and the grad-norm read (4 B/param) over shard
  //! sizes from 64K parameters up to `max_params`.
  void AddOptimizer(int64_t max_params, int64_t steps) {
    std::vector<int64_t> sizes;
    for (int64_t n = 1 << 16; n < max_params; n *= 4) sizes.push_back(n);
    sizes.push_back(std::max<int64_t>(max_params, 1 << 16));
    if (static_cast<int64_t>(sizes.size()) > steps) {
      std::vector<int64_t> pick;
      for (int64_t i = 0; i < steps; ++i) pick.push_back(sizes[static_cast<size_t>(i * (sizes.size() - 1) / (steps - 1))]);
      sizes = pick;
    }
    for (int64_t n : sizes) {
      ProbeShape a;
      a.kind = ProbeKind::kAdamW;
      a.n = n;
      AddKernel("optimizer", 28.0 * static_cast<double>(n), a);
      ProbeShape s;
      s.kind = ProbeKind::kSumSquares;
      s.n = n;
      AddKernel("grad_clip", 4.0 * static_cast<double>(n), s);
    }
  }

  //! Streaming copies ("elementwise", the fallback family; bytes read + written), fp32 -> 16-bit
  //! casts ("cast"), and cold fp32 zero-fills ("grad_zero"), fp32 y += x ("grad_fold") and copies
  //! ("shard_copy").
  void AddStreaming(int64_t max_elements) {
    for (int64_t n = 1 << 12; n <= max_elements; n *= 8) {
      ProbeShape c;
      c.kind = ProbeKind::kCopy;
      c.n = n;
      AddKernel("elementwise", 2.0 * static_cast<double>(n) * executor::SizeOf(o_.kernel_dtype), c);
      ProbeShape k;
      k.kind = ProbeKind::kCast;
      k.n = n;
      const executor::DType half = executor::DType::kBf16;
      k.dtype = half;
      const auto b = static_cast<int64_t>(6 * n);
      if (kernel_seen_.insert({"cast", b}).second) set_.kernels.push_back({"cast", b, k});
      // The ZeRO bookkeeping passes (planner/cost/plan_costs.h ZeroPasses), by the bytes the
      // planner charges them: a zero-fill of fp32 gradients writes 4 B an element, a fold moves 12,
      // a shard copy 2 x the parameter bytes. Their data was last touched a pass or a step ago, so
      // they are timed cold (on this VM a 3 MB fill took 2.2x, a 3 MB y += x 1.7x its cache-hot time).
      auto cold = [&](ProbeKind kind, const char* family, double bytes) {
        ProbeShape z;
        z.kind = kind;
        z.n = n;
        z.cold = true;
        AddKernel(family, bytes, z);
      };
      cold(ProbeKind::kFill, "grad_zero", 4.0 * static_cast<double>(n));
      cold(ProbeKind::kAxpy, "grad_fold", 12.0 * static_cast<double>(n));
      cold(ProbeKind::kCopy, "shard_copy", 2.0 * static_cast<double>(n) * executor::SizeOf(o_.kernel_dtype));
    }
  }

  CalibrationSet Take() { return std::move(set_); }

 private:
  const CalibrationSetOptions& o_;
  CalibrationSet set_;
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, int, bool>> gemm_seen_;
  std::set<std::pair<std::string, int64_t>> kernel_seen_;
};

//! A reference model for the generic run's kernel families (no --model): GPT-2-small widths at a
//! short sequence.
ModelSpec GenericReference() {
  ModelSpec m = *ModelPreset("gpt-tiny");
  m.name = "calibration-reference";
  m.hidden = 512;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 2048;
  m.vocab = 4096;
  m.seq_len = 128;
  return m;
}

}  // namespace

DType ModelDType(executor::DType d) {
  switch (d) {
    case executor::DType::kBf16: return DType::kBf16;
    case executor::DType::kF16: return DType::kFp16;
    default: return DType::kFp32;
  }
}

CalibrationSet BuildCalibrationSet(const CalibrationSetOptions& o) {
  Builder b(o);
  if (o.model != nullptr) {
    for (const ShapeKey& k : SearchedKeys(*o.model, o.ranks_per_node, o.quick)) b.AddModel(*o.model, k);
    const int64_t params = o.model->layers * 12 * o.model->hidden * o.model->hidden + o.model->vocab * o.model->hidden;
    b.AddOptimizer(params, o.quick ? 3 : 6);
    b.AddStreaming(o.quick ? (1 << 24) : (1 << 25));
    return b.Take();
  }
  // Generic: a full m x n x k grid (the planner interpolates multilinearly inside a full grid).
  const std::vector<int64_t> dims = o.quick ? std::vector<int64_t>{64, 256, 1024} : std::vector<int64_t>{32, 128, 512, 2048};
  for (int64_t m : dims) {
    for (int64_t n : dims) {
      for (int64_t k : dims) b.AddGemm(m, n, k, 1, Trans::kNo, Trans::kYes, 0);
    }
  }
  const ModelSpec tiny = *ModelPreset("gpt-tiny");
  const ModelSpec ref = GenericReference();
  for (const ModelSpec* m : {&tiny, &ref}) {
    for (int64_t mb : {1, 4}) {
      b.AddModel(*m, ShapeKey{1, mb, false});
    }
  }
  // The models' GEMMs would break the full grid: keep only the grid's.
  CalibrationSet set = b.Take();
  std::vector<GemmPoint> grid;
  for (const auto& g : set.gemms) {
    if (std::find(dims.begin(), dims.end(), g.probe.m) != dims.end() &&
        std::find(dims.begin(), dims.end(), g.probe.n) != dims.end() &&
        std::find(dims.begin(), dims.end(), g.probe.k) != dims.end() && g.probe.batch == 1 && g.probe.beta == 0 &&
        g.probe.tb == Trans::kYes) {
      grid.push_back(g);
    }
  }
  set.gemms = std::move(grid);
  Builder extra(o);
  extra.AddOptimizer(int64_t{1} << (o.quick ? 22 : 25), o.quick ? 3 : 6);
  extra.AddStreaming(o.quick ? (1 << 24) : (1 << 25));
  CalibrationSet e = extra.Take();
  set.kernels.insert(set.kernels.end(), e.kernels.begin(), e.kernels.end());
  return set;
}

}  // namespace parallax::profiler
