// The CPU backend's typed entry points: fp32 operands go straight to the fp32 kernels; bf16/fp16
// operands are widened into fp32 scratch, and outputs are rounded back (round to nearest even).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "executor/cpu/cpu_backend.h"

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

void CpuBackend::Copy(DevPtr dst, DevPtr src, int64_t n) {
  if (n > 0 && dst.ptr != src.ptr) ConvertElements(dst.ptr, dst.dtype, src.ptr, src.dtype, n);
}

void CpuBackend::Axpy(DevPtr y, DevPtr x, int64_t n, float alpha) {
  F32Operands f(*this);
  const float* xs = f.In(x, n);
  Axpy(f.Out(y, n, true), xs, n, alpha);
}

void CpuBackend::AddBias(DevPtr y, DevPtr bias, int64_t rows, int64_t cols) {
  F32Operands f(*this);
  const float* b = f.In(bias, cols);
  AddBias(f.Out(y, rows * cols, true), b, rows, cols);
}

void CpuBackend::BiasBackward(DevPtr dy, DevPtr dbias, int64_t rows, int64_t cols) {
  F32Operands f(*this);
  const float* d = f.In(dy, rows * cols);
  BiasBackward(d, f.Out(dbias, cols, true), rows, cols);
}

void CpuBackend::LayerNormForward(DevPtr x, DevPtr gamma, DevPtr beta, DevPtr y, DevPtr mean, DevPtr rstd,
                                  int64_t rows, int64_t cols, float eps) {
  F32Operands f(*this);
  LayerNormForward(f.In(x, rows * cols), f.In(gamma, cols), f.In(beta, cols), f.Out(y, rows * cols),
                   f.Out(mean, rows), f.Out(rstd, rows), rows, cols, eps);
}

void CpuBackend::LayerNormBackward(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd, DevPtr dx,
                                   DevPtr dgamma, DevPtr dbeta, int64_t rows, int64_t cols) {
  F32Operands f(*this);
  LayerNormBackward(f.In(dy, rows * cols), f.In(x, rows * cols), f.In(gamma, cols), f.In(mean, rows),
                    f.In(rstd, rows), f.Out(dx, rows * cols), f.Out(dgamma, cols, true), f.Out(dbeta, cols, true),
                    rows, cols);
}

void CpuBackend::RmsNormForward(DevPtr x, DevPtr gamma, DevPtr y, DevPtr rstd, int64_t rows, int64_t cols,
                                float eps) {
  F32Operands f(*this);
  RmsNormForward(f.In(x, rows * cols), f.In(gamma, cols), f.Out(y, rows * cols), f.Out(rstd, rows), rows, cols, eps);
}

void CpuBackend::RmsNormBackward(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr rstd, DevPtr dx, DevPtr dgamma,
                                 int64_t rows, int64_t cols) {
  F32Operands f(*this);
  RmsNormBackward(f.In(dy, rows * cols), f.In(x, rows * cols), f.In(gamma, cols), f.In(rstd, rows),
                  f.Out(dx, rows * cols), f.Out(dgamma, cols, true), rows, cols);
}

void CpuBackend::GeluForward(DevPtr x, DevPtr y, int64_t n) {
  F32Operands f(*this);
  const float* xs = f.In(x, n);
  GeluForward(xs, f.Out(y, n), n);
}

void CpuBackend::GeluBackward(DevPtr x, DevPtr dy, DevPtr dx, int64_t n) {
  F32Operands f(*this);
  const float* xs = f.In(x, n);
  const float* d = f.In(dy, n);
  GeluBackward(xs, d, f.Out(dx, n), n);
}

void CpuBackend::SwigluForward(DevPtr gate, DevPtr up, DevPtr y, int64_t n) {
  F32Operands f(*this);
  const float* g = f.In(gate, n);
  const float* u = f.In(up, n);
  SwigluForward(g, u, f.Out(y, n), n);
}

void CpuBackend::SwigluBackward(DevPtr gate, DevPtr up, DevPtr dy, DevPtr dgate, DevPtr dup, int64_t n) {
  F32Operands f(*this);
  const float* g = f.In(gate, n);
  const float* u = f.In(up, n);
  const float* d = f.In(dy, n);
  SwigluBackward(g, u, d, f.Out(dgate, n), f.Out(dup, n), n);
}

void CpuBackend::Rotary(DevPtr x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, bool inverse) {
  F32Operands f(*this);
  Rotary(f.Out(x, seq * batch * heads * head_dim, true), seq, batch, heads, head_dim, inverse);
}

void CpuBackend::AttentionForward(const AttentionShape& s, DevPtr q, DevPtr k, DevPtr v, DevPtr out, DevPtr probs) {
  (void)streams_.Progress();
  F32Operands f(*this);
  const int64_t rows = s.seq * s.batch;
  AttentionForward(s, f.In(q, rows * s.heads * s.head_dim), f.In(k, rows * s.kv_heads * s.head_dim),
                   f.In(v, rows * s.kv_heads * s.head_dim), f.Out(out, rows * s.heads * s.head_dim),
                   f.Out(probs, s.probs_floats()));
}

void CpuBackend::AttentionBackward(const AttentionShape& s, DevPtr q, DevPtr k, DevPtr v, DevPtr probs, DevPtr dout,
                                   DevPtr dq, DevPtr dk, DevPtr dv) {
  (void)streams_.Progress();
  F32Operands f(*this);
  const int64_t rows = s.seq * s.batch, qn = rows * s.heads * s.head_dim, kn = rows * s.kv_heads * s.head_dim;
  AttentionBackward(s, f.In(q, qn), f.In(k, kn), f.In(v, kn), f.In(probs, s.probs_floats()), f.In(dout, qn),
                    f.Out(dq, qn), f.Out(dk, kn), f.Out(dv, kn));
}

void CpuBackend::EmbeddingForward(DevPtr index, int64_t n, DevPtr table, int64_t vocab_begin, int64_t table_rows,
                                  int64_t hidden, DevPtr out, bool accumulate) {
  F32Operands f(*this);
  const float* t = f.In(table, table_rows * hidden);
  if (!accumulate) {
    EmbeddingForward(Ints(index), n, t, vocab_begin, table_rows, hidden, f.Out(out, n * hidden));
    return;
  }
  float* rows = scratch_.Get(n * hidden);
  EmbeddingForward(Ints(index), n, t, vocab_begin, table_rows, hidden, rows);
  Axpy(f.Out(out, n * hidden, true), rows, n * hidden, 1.0f);
}

void CpuBackend::EmbeddingBackward(DevPtr index, int64_t n, DevPtr dout, int64_t vocab_begin, int64_t table_rows,
                                   int64_t hidden, DevPtr dtable) {
  F32Operands f(*this);
  const float* d = f.In(dout, n * hidden);
  EmbeddingBackward(Ints(index), n, d, vocab_begin, table_rows, hidden, f.Out(dtable, table_rows * hidden, true));
}

void CpuBackend::RowMax(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max) {
  F32Operands f(*this);
  const float* l = f.In(logits, rows * cols);
  RowMax(l, rows, cols, f.Out(row_max, rows));
}

void CpuBackend::CrossEntropyStats(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max, DevPtr targets,
                                   int64_t vocab_begin, DevPtr sum_exp, DevPtr target_logit) {
  F32Operands f(*this);
  const float* l = f.In(logits, rows * cols);
  const float* mx = f.In(row_max, rows);
  CrossEntropyStats(l, rows, cols, mx, Ints(targets), vocab_begin, f.Out(sum_exp, rows), f.Out(target_logit, rows));
}

void CpuBackend::CrossEntropyCombine(DevPtr stats, int64_t rows, int64_t parts, DevPtr row_max, DevPtr sum_exp,
                                     DevPtr loss_sum) {
  F32Operands f(*this);
  const float* st = f.In(stats, 3 * rows * parts);
  float* mx = f.Out(row_max, rows);
  float* se = f.Out(sum_exp, rows);
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
  *static_cast<double*>(loss_sum.ptr) += loss;
}

void CpuBackend::CrossEntropyBackward(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max, DevPtr sum_exp,
                                      DevPtr targets, int64_t vocab_begin, float scale, DevPtr dlogits) {
  F32Operands f(*this);
  const float* l = f.In(logits, rows * cols);
  const float* mx = f.In(row_max, rows);
  const float* se = f.In(sum_exp, rows);
  CrossEntropyBackward(l, rows, cols, mx, se, Ints(targets), vocab_begin, scale, f.Out(dlogits, rows * cols));
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
