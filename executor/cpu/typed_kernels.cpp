// The CPU backend's typed entry points: fp32 operands go straight to the fp32 kernels; bf16/fp16
// operands are widened into fp32 scratch, and outputs are rounded back (round to nearest even).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/kernel_threads.h"

namespace parallax::executor {

void ConvertElements(void* dst, DType dt, const void* src, DType st, int64_t n);

//! fp32 views of a kernel's operands for the duration of one call.
class F32Operands {
 public:
  explicit F32Operands(CpuBackend& be) : be_(be), mark_(be.scratch_.mark()) {}
  ~F32Operands() {
    for (const Pending& o : outs_) ConvertElements(o.dst.ptr, o.dst.dtype, o.f32, DType::kF32, o.n);
    be_.scratch_.Rewind(mark_);
  }
  F32Operands(const F32Operands&) = delete;
  F32Operands& operator=(const F32Operands&) = delete;

  const float* In(DevPtr p, int64_t n) {
    if (!p) return nullptr;
    if (p.dtype == DType::kF32) return static_cast<const float*>(p.ptr);
    float* s = be_.scratch_.Get(n);
    ConvertElements(s, DType::kF32, p.ptr, p.dtype, n);
    return s;
  }
  //! An output (with `load`: also read, e.g. accumulated into).
  float* Out(DevPtr p, int64_t n, bool load = false) {
    if (!p) return nullptr;
    if (p.dtype == DType::kF32) return static_cast<float*>(p.ptr);
    float* s = be_.scratch_.Get(n);
    if (load) ConvertElements(s, DType::kF32, p.ptr, p.dtype, n);
    outs_.push_back({p, s, n});
    return s;
  }

 private:
  struct Pending {
    DevPtr dst;
    float* f32;
    int64_t n;
  };
  CpuBackend& be_;
  size_t mark_;
  std::vector<Pending> outs_;
};

namespace {
const int32_t* Ints(DevPtr p) { return static_cast<const int32_t*>(p.ptr); }
int64_t Extent(int64_t batch, int64_t stride, int64_t rows, int64_t ld, int64_t cols) {
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}
}  // namespace

void CpuBackend::Gemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  (void)streams_.Progress();  // let queued communication move while the host computes
  F32Operands f(*this);
  const int64_t a_rows = g.ta == Trans::kYes ? g.k : g.m, a_cols = g.ta == Trans::kYes ? g.m : g.k;
  const int64_t b_rows = g.tb == Trans::kYes ? g.n : g.k, b_cols = g.tb == Trans::kYes ? g.k : g.n;
  const float* a = f.In(g.a, Extent(g.batch, g.stride_a, a_rows, g.lda, a_cols));
  const float* b = f.In(g.b, Extent(g.batch, g.stride_b, b_rows, g.ldb, b_cols));
  float* c = f.Out(g.c, Extent(g.batch, g.stride_c, g.m, g.ldc, g.n), g.beta != 0.0f);
  for (int64_t i = 0; i < g.batch; ++i) {
    Gemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a + i * g.stride_a, g.lda, b + i * g.stride_b, g.ldb, g.beta,
         c + i * g.stride_c, g.ldc);
  }
}

void CpuBackend::Fill(DevPtr x, int64_t n, float value) {
  if (x.dtype == DType::kF32) return Fill(static_cast<float*>(x.ptr), n, value);
  F32Operands f(*this);
  Fill(f.Out(x, n), n, value);
}

void CpuBackend::Copy(const CopyArgs& a) {
  if (a.n > 0 && a.dst.ptr != a.src.ptr) ConvertElements(a.dst.ptr, a.dst.dtype, a.src.ptr, a.src.dtype, a.n);
}

void CpuBackend::Axpy(const AxpyArgs& a) {
  F32Operands f(*this);
  const float* xs = f.In(a.x, a.n);
  Axpy(f.Out(a.y, a.n, true), xs, a.n, a.alpha);
}

void CpuBackend::AddBias(const BiasArgs& a) {
  F32Operands f(*this);
  const float* b = f.In(a.bias, a.cols);
  AddBias(f.Out(a.y, a.rows * a.cols, true), b, a.rows, a.cols);
}

void CpuBackend::BiasBackward(const BiasBackwardArgs& a) {
  F32Operands f(*this);
  const float* d = f.In(a.dy, a.rows * a.cols);
  BiasBackward(d, f.Out(a.dbias, a.cols, true), a.rows, a.cols);
}

void CpuBackend::LayerNormForward(const NormArgs& a) {
  F32Operands f(*this);
  const int64_t rows = a.rows, cols = a.cols;
  LayerNormForward(f.In(a.x, rows * cols), f.In(a.gamma, cols), f.In(a.beta, cols), f.Out(a.y, rows * cols),
                   f.Out(a.mean, rows), f.Out(a.rstd, rows), rows, cols, a.eps);
}

void CpuBackend::LayerNormBackward(const NormBackwardArgs& a) {
  F32Operands f(*this);
  const int64_t rows = a.rows, cols = a.cols;
  LayerNormBackward(f.In(a.dy, rows * cols), f.In(a.x, rows * cols), f.In(a.gamma, cols), f.In(a.mean, rows),
                    f.In(a.rstd, rows), f.Out(a.dx, rows * cols), f.Out(a.dgamma, cols, true),
                    f.Out(a.dbeta, cols, true), rows, cols);
}

void CpuBackend::RmsNormForward(const NormArgs& a) {
  F32Operands f(*this);
  const int64_t rows = a.rows, cols = a.cols;
  RmsNormForward(f.In(a.x, rows * cols), f.In(a.gamma, cols), f.Out(a.y, rows * cols), f.Out(a.rstd, rows), rows,
                 cols, a.eps);
}

void CpuBackend::RmsNormBackward(const NormBackwardArgs& a) {
  F32Operands f(*this);
  const int64_t rows = a.rows, cols = a.cols;
  RmsNormBackward(f.In(a.dy, rows * cols), f.In(a.x, rows * cols), f.In(a.gamma, cols), f.In(a.rstd, rows),
                  f.Out(a.dx, rows * cols), f.Out(a.dgamma, cols, true), rows, cols);
}

void CpuBackend::GeluForward(const GeluArgs& a) {
  F32Operands f(*this);
  const float* xs = f.In(a.x, a.n);
  GeluForward(xs, f.Out(a.y, a.n), a.n);
}

void CpuBackend::GeluBackward(const GeluBackwardArgs& a) {
  F32Operands f(*this);
  const float* xs = f.In(a.x, a.n);
  const float* d = f.In(a.dy, a.n);
  GeluBackward(xs, d, f.Out(a.dx, a.n), a.n);
}

void CpuBackend::SwigluForward(const SwigluArgs& a) {
  F32Operands f(*this);
  const float* g = f.In(a.gate, a.n);
  const float* u = f.In(a.up, a.n);
  SwigluForward(g, u, f.Out(a.y, a.n), a.n);
}

void CpuBackend::SwigluBackward(const SwigluBackwardArgs& a) {
  F32Operands f(*this);
  const float* g = f.In(a.gate, a.n);
  const float* u = f.In(a.up, a.n);
  const float* d = f.In(a.dy, a.n);
  SwigluBackward(g, u, d, f.Out(a.dgate, a.n), f.Out(a.dup, a.n), a.n);
}

void CpuBackend::Rotary(const RotaryArgs& a) {
  F32Operands f(*this);
  Rotary(f.Out(a.x, a.seq * a.batch * a.heads * a.head_dim, true), a.seq, a.batch, a.heads, a.head_dim,
         a.first_position, a.inverse);
}

void CpuBackend::AttentionForward(const AttentionArgs& a) {
  (void)streams_.Progress();
  F32Operands f(*this);
  const AttentionShape& s = a.shape;
  const int64_t qn = s.q_elements(), kn = s.kv_elements();
  AttentionForward(s, f.In(a.q, qn), f.In(a.k, kn), f.In(a.v, kn), f.Out(a.out, qn), f.Out(a.lse, s.stats_floats()));
}

void CpuBackend::AttentionBackward(const AttentionBackwardArgs& a) {
  (void)streams_.Progress();
  F32Operands f(*this);
  const AttentionShape& s = a.shape;
  const int64_t qn = s.q_elements(), kn = s.kv_elements();
  AttentionBackward(s, {.q = f.In(a.q, qn), .k = f.In(a.k, kn), .v = f.In(a.v, kn), .out = f.In(a.out, qn),
                        .lse = f.In(a.lse, s.stats_floats()), .dout = f.In(a.dout, qn), .dq = f.Out(a.dq, qn),
                        .dk = f.Out(a.dk, kn), .dv = f.Out(a.dv, kn)});
}

void CpuBackend::EmbeddingForward(const EmbeddingArgs& a) {
  F32Operands f(*this);
  const int64_t n = a.n, hidden = a.hidden;
  const float* t = f.In(a.table, a.table_rows * hidden);
  if (!a.accumulate) {
    EmbeddingForward(Ints(a.index), n, t, a.vocab_begin, a.table_rows, hidden, f.Out(a.out, n * hidden));
    return;
  }
  float* rows = scratch_.Get(n * hidden);
  EmbeddingForward(Ints(a.index), n, t, a.vocab_begin, a.table_rows, hidden, rows);
  Axpy(f.Out(a.out, n * hidden, true), rows, n * hidden, 1.0f);
}

void CpuBackend::EmbeddingBackward(const EmbeddingBackwardArgs& a) {
  F32Operands f(*this);
  const float* d = f.In(a.dout, a.n * a.hidden);
  EmbeddingBackward(Ints(a.index), a.n, d, a.vocab_begin, a.table_rows, a.hidden,
                    f.Out(a.dtable, a.table_rows * a.hidden, true));
}

void CpuBackend::RowMax(const RowMaxArgs& a) {
  F32Operands f(*this);
  const float* l = f.In(a.logits, a.rows * a.cols);
  RowMax(l, a.rows, a.cols, f.Out(a.row_max, a.rows));
}

void CpuBackend::CrossEntropyStats(const CrossEntropyStatsArgs& a) {
  F32Operands f(*this);
  const float* l = f.In(a.logits, a.rows * a.cols);
  const float* mx = f.In(a.row_max, a.rows);
  CrossEntropyStats(l, a.rows, a.cols, mx, Ints(a.targets), a.vocab_begin, f.Out(a.sum_exp, a.rows),
                    f.Out(a.target_logit, a.rows));
}

void CpuBackend::CrossEntropyCombine(const CrossEntropyCombineArgs& a) {
  F32Operands f(*this);
  const int64_t rows = a.rows, parts = a.parts;
  const float* st = f.In(a.stats, 3 * rows * parts);
  float* mx = f.Out(a.row_max, rows);
  float* se = f.Out(a.sum_exp, rows);
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t p = 0; p < parts; ++p) m = std::max(m, st[3 * rows * p + r]);
    double s = 0, target = 0;
    for (int64_t p = 0; p < parts; ++p) {
      const float* part = st + 3 * rows * p;
      s += static_cast<double>(part[rows + r]) * std::exp(static_cast<double>(part[r]) - m);
      target += part[2 * rows + r];
    }
    mx[r] = m;
    se[r] = static_cast<float>(s);
    loss += std::log(static_cast<double>(se[r])) + m - target;
  }
  *static_cast<double*>(a.loss_sum.ptr) += loss;
}

void CpuBackend::CrossEntropyBackward(const CrossEntropyBackwardArgs& a) {
  F32Operands f(*this);
  const float* l = f.In(a.logits, a.rows * a.cols);
  const float* mx = f.In(a.row_max, a.rows);
  const float* se = f.In(a.sum_exp, a.rows);
  CrossEntropyBackward(l, a.rows, a.cols, mx, se, Ints(a.targets), a.vocab_begin, a.scale,
                       f.Out(a.dlogits, a.rows * a.cols));
}

void CpuBackend::AttentionMerge(const AttentionMergeArgs& a) {
  F32Operands f(*this);
  const int64_t D = a.head_dim, n = a.rows * a.heads * D;
  float* out = f.Out(a.out, n, true);
  const float* block = f.In(a.block_out, n);
  auto* lse = static_cast<float*>(a.lse.ptr);
  const auto* block_lse = static_cast<const float*>(a.block_lse.ptr);
  ParallelFor(a.rows * a.heads, RowGrain(D), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float l = lse[i], b = block_lse[i], m = std::max(l, b);
      if (m == -std::numeric_limits<float>::infinity()) continue;
      const float merged = m + std::log(std::exp(l - m) + std::exp(b - m));
      const float wa = std::exp(l - merged), wb = std::exp(b - merged);
      for (int64_t d = 0; d < D; ++d) out[i * D + d] = wa * out[i * D + d] + wb * block[i * D + d];
      lse[i] = merged;
    }
  });
}

void CpuBackend::MultiTensorAdamW(std::span<const AdamWTensor> tensors, const AdamWParams& p) {
  for (const AdamWTensor& t : tensors) {
    if (t.n == 0) continue;
    AdamWParams q = p;
    if (!t.decay) q.weight_decay = 0;
    AdamW(static_cast<float*>(t.main.ptr), static_cast<const float*>(t.grad.ptr), static_cast<float*>(t.m.ptr),
          static_cast<float*>(t.v.ptr), t.n, q);
    if (t.model && t.model.ptr != t.main.ptr) ConvertElements(t.model.ptr, t.model.dtype, t.main.ptr, DType::kF32, t.n);
  }
}

void CpuBackend::MultiTensorSumSquares(std::span<const DevSpan> spans, DevPtr out) {
  double sum = 0;
  for (const DevSpan& s : spans) {
    F32Operands f(*this);
    sum += SumSquares(f.In(s.p, s.n), s.n);
  }
  *static_cast<double*>(out.ptr) += sum;
}

}  // namespace parallax::executor
