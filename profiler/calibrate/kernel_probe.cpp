#include "profiler/calibrate/kernel_probe.h"

#include <algorithm>
#include <random>

namespace parallax::profiler {
namespace {

using executor::DType;
using executor::SizeOf;

const char* KindName(ProbeKind k) {
  switch (k) {
    case ProbeKind::kGemm: return "gemm";
    case ProbeKind::kNormFwd: return "norm_fwd";
    case ProbeKind::kResidualNormFwd: return "residual_norm_fwd";
    case ProbeKind::kNormBwd: return "norm_bwd";
    case ProbeKind::kActFwd: return "act_fwd";
    case ProbeKind::kActBwd: return "act_bwd";
    case ProbeKind::kResidualFwd: return "residual_fwd";
    case ProbeKind::kResidualBwd: return "residual_bwd";
    case ProbeKind::kQkvEpilogueFwd: return "qkv_epilogue_fwd";
    case ProbeKind::kQkvEpilogueBwd: return "qkv_epilogue_bwd";
    case ProbeKind::kAttentionFwd: return "attention_fwd";
    case ProbeKind::kAttentionBwd: return "attention_bwd";
    case ProbeKind::kEmbeddingFwd: return "embedding_fwd";
    case ProbeKind::kEmbeddingBwd: return "embedding_bwd";
    case ProbeKind::kLossFwd: return "loss_fwd";
    case ProbeKind::kLossBwd: return "loss_bwd";
    case ProbeKind::kAdamW: return "adamw";
    case ProbeKind::kSumSquares: return "sum_squares";
    case ProbeKind::kCast: return "cast";
    case ProbeKind::kCopy: return "copy";
    case ProbeKind::kFill: return "fill";
    case ProbeKind::kAxpy: return "axpy";
  }
  return "?";
}

//! A host buffer of uniform values in [-1, 1), shared by every fill (grown on demand).
const std::vector<float>& RandomHost(int64_t n) {
  static std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) {
    std::mt19937 rng(12345 + static_cast<unsigned>(buf.size()));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const size_t old = buf.size();
    buf.resize(static_cast<size_t>(n));
    for (size_t i = old; i < buf.size(); ++i) buf[i] = u(rng);
  }
  return buf;
}

}  // namespace

int64_t ProbeShape::FootprintBytes() const {
  const int64_t e = SizeOf(dtype);
  switch (kind) {
    case ProbeKind::kGemm: return (m * k * e + k * n * e + m * n * (beta != 0 ? 4 : e)) * batch;
    case ProbeKind::kAttentionFwd:
    case ProbeKind::kAttentionBwd: {
      const auto& a = attention;
      const int64_t tok = a.seq * a.batch;
      return (e * (2 * tok * a.heads * a.head_dim + 2 * tok * a.kv_heads * a.head_dim) + 4 * a.stats_floats()) *
             (kind == ProbeKind::kAttentionBwd ? 2 : 1);
    }
    case ProbeKind::kQkvEpilogueFwd:
    case ProbeKind::kQkvEpilogueBwd:
      return e * attention.seq * attention.batch * (attention.heads + 2 * attention.kv_heads) * attention.head_dim;
    case ProbeKind::kLossFwd:
    case ProbeKind::kLossBwd: return rows * vocab_rows * e * 2 + rows * 20;
    case ProbeKind::kEmbeddingFwd:
    case ProbeKind::kEmbeddingBwd: return vocab_rows * cols * 4 + rows * cols * e * 2;
    case ProbeKind::kAdamW: return n * 16 + (dtype != DType::kF32 ? n * e : 0);
    case ProbeKind::kSumSquares:
    case ProbeKind::kFill: return n * 4;
    case ProbeKind::kAxpy: return n * 8;
    case ProbeKind::kCast:
    case ProbeKind::kCopy:
    case ProbeKind::kActFwd:
    case ProbeKind::kActBwd: return n * e * 5;
    default: return rows * cols * e * 6;
  }
}

std::string ProbeShape::Describe() const {
  std::string s = KindName(kind);
  auto kv = [&](const char* key, int64_t v) { s += std::string(" ") + key + "=" + std::to_string(v); };
  switch (kind) {
    case ProbeKind::kGemm:
      kv("m", m);
      kv("n", n);
      kv("k", k);
      if (batch != 1) kv("batch", batch);
      if (beta != 0) s += " accumulate";
      break;
    case ProbeKind::kAttentionFwd:
    case ProbeKind::kAttentionBwd:
    case ProbeKind::kQkvEpilogueFwd:
    case ProbeKind::kQkvEpilogueBwd:
      kv("b", attention.batch);
      kv("s", attention.seq);
      kv("heads", attention.heads);
      kv("kv_heads", attention.kv_heads);
      kv("d", attention.head_dim);
      break;
    case ProbeKind::kActFwd:
    case ProbeKind::kActBwd:
    case ProbeKind::kAdamW:
    case ProbeKind::kSumSquares:
    case ProbeKind::kCast:
    case ProbeKind::kCopy:
    case ProbeKind::kFill:
    case ProbeKind::kAxpy: kv("n", n); break;
    default:
      kv("rows", rows);
      kv("cols", vocab_rows > 0 && kind != ProbeKind::kEmbeddingFwd && kind != ProbeKind::kEmbeddingBwd ? vocab_rows
                                                                                                         : cols);
      break;
  }
  return s + " " + executor::ToString(dtype) + (cold ? " cold" : "");
}

Result<size_t> KernelProbe::Add(executor::Backend& backend, int64_t numel, DType dtype, bool random) {
  PX_ASSIGN(auto t, backend.Allocate(std::max<int64_t>(numel, 1), dtype, executor::MemoryKind::kWorkspace));
  if (random && dtype != DType::kI32) {
    const auto& host = RandomHost(t.numel());
    backend.CopyToDevice(t.ptr(), host.data(), DType::kF32, t.numel());
  } else if (dtype == DType::kF32 || dtype == DType::kF64 || executor::IsHalf(dtype)) {
    backend.Fill(t.ptr(), t.numel(), 0.0f);
  }
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

Status KernelProbe::AddInput(executor::Backend& backend, int64_t numel, DType dtype, bool random) {
  auto r = Add(backend, numel, dtype, random);
  if (!r) {
    tensors_.clear();
    return r.error();
  }
  return {};
}

Status KernelProbe::AddIndices(executor::Backend& backend, int64_t count, int64_t range) {
  auto r = Add(backend, count, DType::kI32, false);
  if (!r) {
    tensors_.clear();
    return r.error();
  }
  std::vector<int32_t> host(static_cast<size_t>(count));
  std::mt19937 rng(7);
  for (auto& v : host) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(std::max<int64_t>(range, 1)));
  backend.CopyToDevice(tensors_[*r].ptr(), host.data(), DType::kI32, count);
  return {};
}

// x, gamma, beta, y, mean, rstd; fused with the residual join: then residual, bias, h (x is the
// branch).
Status KernelProbe::AddNormInputs(executor::Backend& backend) {
  const ProbeShape& p = shape_;
  const DType d = p.dtype;
  PX_TRY(AddInput(backend, p.rows * p.cols, d));
  PX_TRY(AddInput(backend, p.cols, d));
  PX_TRY(AddInput(backend, p.cols, d));
  PX_TRY(AddInput(backend, p.rows * p.cols, d, false));
  PX_TRY(AddInput(backend, p.rows, DType::kF32, false));
  PX_TRY(AddInput(backend, p.rows, DType::kF32, false));
  if (p.kind == ProbeKind::kResidualNormFwd) {
    PX_TRY(AddInput(backend, p.rows * p.cols, d));
    PX_TRY(AddInput(backend, p.cols, d));
    PX_TRY(AddInput(backend, p.rows * p.cols, d, false));
  }
  return {};
}

// dy, x, gamma, mean, rstd, dx, dgamma, dbeta, dh
Status KernelProbe::AddNormBwdInputs(executor::Backend& backend) {
  const ProbeShape& p = shape_;
  const DType d = p.dtype;
  PX_TRY(AddInput(backend, p.rows * p.cols, d));
  PX_TRY(AddInput(backend, p.rows * p.cols, d));
  PX_TRY(AddInput(backend, p.cols, d));
  PX_TRY(AddInput(backend, p.rows, DType::kF32));
  PX_TRY(AddInput(backend, p.rows, DType::kF32));
  PX_TRY(AddInput(backend, p.rows * p.cols, d, false));
  PX_TRY(AddInput(backend, p.cols, DType::kF32, false));
  PX_TRY(AddInput(backend, p.cols, DType::kF32, false));
  PX_TRY(AddInput(backend, p.rows * p.cols, d));
  return {};
}

// Forward: x (gate), up, y. Backward: x (gate), up, dy, dx (dgate), dup.
Status KernelProbe::AddActInputs(executor::Backend& backend) {
  const ProbeShape& p = shape_;
  const DType d = p.dtype;
  PX_TRY(AddInput(backend, p.n, d));
  PX_TRY(AddInput(backend, p.swiglu ? p.n : 1, d));
  PX_TRY(AddInput(backend, p.n, d));
  if (p.kind == ProbeKind::kActBwd) {
    PX_TRY(AddInput(backend, p.n, d, false));
    PX_TRY(AddInput(backend, p.swiglu ? p.n : 1, d, false));
  }
  return {};
}

// q, k, v (random) at attention's shape.
Status KernelProbe::AddQkvInputs(executor::Backend& backend) {
  const auto& a = shape_.attention;
  const int64_t tok = a.seq * a.batch;
  PX_TRY(AddInput(backend, tok * a.heads * a.head_dim, shape_.dtype));
  PX_TRY(AddInput(backend, tok * a.kv_heads * a.head_dim, shape_.dtype));
  PX_TRY(AddInput(backend, tok * a.kv_heads * a.head_dim, shape_.dtype));
  return {};
}

// Forward: q, k, v, bq, bk, bv. Backward: dq, dk, dv, dbq, dbk, dbv.
Status KernelProbe::AddQkvEpilogueInputs(executor::Backend& backend) {
  const ProbeShape& p = shape_;
  const DType d = p.dtype;
  const auto& a = p.attention;
  const DType bias_type = p.kind == ProbeKind::kQkvEpilogueBwd ? DType::kF32 : d;
  PX_TRY(AddQkvInputs(backend));
  PX_TRY(AddInput(backend, a.heads * a.head_dim, bias_type));
  PX_TRY(AddInput(backend, a.kv_heads * a.head_dim, bias_type));
  PX_TRY(AddInput(backend, a.kv_heads * a.head_dim, bias_type));
  return {};
}

// q, k, v, out, lse (fp32) [, dout, dq, dk, dv]
Status KernelProbe::AddAttentionInputs(executor::Backend& backend) {
  const ProbeShape& p = shape_;
  const DType d = p.dtype;
  const auto& a = p.attention;
  const int64_t tok = a.seq * a.batch;
  PX_TRY(AddQkvInputs(backend));
  PX_TRY(AddInput(backend, tok * a.heads * a.head_dim, d, false));
  PX_TRY(AddInput(backend, a.stats_floats(), DType::kF32, false));
  if (p.kind == ProbeKind::kAttentionBwd) {
    backend.AttentionForward(  // the real output and statistics
        {.shape = a, .q = T(0), .k = T(1), .v = T(2), .out = T(3), .lse = T(4)});
    PX_TRY(AddInput(backend, tok * a.heads * a.head_dim, d));
    PX_TRY(AddInput(backend, tok * a.heads * a.head_dim, d, false));
    PX_TRY(AddInput(backend, tok * a.kv_heads * a.head_dim, d, false));
    PX_TRY(AddInput(backend, tok * a.kv_heads * a.head_dim, d, false));
  }
  return {};
}

// Forward: index, table, out, positions index, position table. Backward: index, dout, dtable
// (fp32), positions index, dpos (fp32).
Status KernelProbe::AddEmbeddingInputs(executor::Backend& backend) {
  const ProbeShape& p = shape_;
  const DType d = p.dtype;
  PX_TRY(AddIndices(backend, p.rows, p.vocab_rows));
  PX_TRY(AddInput(backend, p.kind == ProbeKind::kEmbeddingFwd ? p.vocab_rows * p.cols : p.rows * p.cols, d));
  PX_TRY(AddInput(backend, p.kind == ProbeKind::kEmbeddingFwd ? p.rows * p.cols : p.vocab_rows * p.cols,
                              p.kind == ProbeKind::kEmbeddingFwd ? d : DType::kF32, false));
  if (p.positions) {
    PX_TRY(AddIndices(backend, p.rows, p.rows));
    PX_TRY(AddInput(backend, p.rows * p.cols, p.kind == ProbeKind::kEmbeddingFwd ? d : DType::kF32));
  }
  return {};
}

// logits, stats [row max | sum_exp | target logit], targets, row_max, sum_exp, loss; the backward
// then dlogits.
Status KernelProbe::AddLossInputs(executor::Backend& backend) {
  const ProbeShape& p = shape_;
  const DType d = p.dtype;
  PX_TRY(AddInput(backend, p.rows * p.vocab_rows, d));
  PX_TRY(AddInput(backend, 3 * p.rows, DType::kF32));
  PX_TRY(AddIndices(backend, p.rows, p.vocab_rows));
  PX_TRY(AddInput(backend, p.rows, DType::kF32));
  PX_TRY(AddInput(backend, p.rows, DType::kF32));
  PX_TRY(AddInput(backend, 1, DType::kF64, false));
  if (p.kind == ProbeKind::kLossBwd) {
    backend.RowMax({.logits = T(0), .row_max = T(1), .rows = p.rows, .cols = p.vocab_rows});
    backend.CrossEntropyStats({.logits = T(0), .row_max = T(1), .targets = T(2), .sum_exp = T(1) + p.rows,
                               .target_logit = T(1) + 2 * p.rows, .rows = p.rows, .cols = p.vocab_rows});
    PX_TRY(AddInput(backend, p.rows * p.vocab_rows, d, false));
  }
  return {};
}

Status KernelProbe::AddInputs(executor::Backend& backend) {
  const ProbeShape& p = shape_;
  const DType d = p.dtype;
  switch (p.kind) {
    case ProbeKind::kGemm:
      PX_TRY(AddInput(backend, p.m * p.k * p.batch, d));
      PX_TRY(AddInput(backend, p.k * p.n * p.batch, d));
      PX_TRY(AddInput(backend, p.m * p.n * p.batch, p.beta != 0 ? DType::kF32 : d));
      break;
    case ProbeKind::kNormFwd:
    case ProbeKind::kResidualNormFwd: return AddNormInputs(backend);
    case ProbeKind::kNormBwd: return AddNormBwdInputs(backend);
    case ProbeKind::kActFwd:
    case ProbeKind::kActBwd: return AddActInputs(backend);
    case ProbeKind::kResidualFwd:  // x, o, h, bias
    case ProbeKind::kResidualBwd:  // dout, dh, -, dbias
      PX_TRY(AddInput(backend, p.rows * p.cols, d));
      PX_TRY(AddInput(backend, p.rows * p.cols, d));
      PX_TRY(AddInput(backend, p.rows * p.cols, d, false));
      PX_TRY(AddInput(backend, p.cols, p.kind == ProbeKind::kResidualBwd ? DType::kF32 : d));
      break;
    case ProbeKind::kQkvEpilogueFwd:
    case ProbeKind::kQkvEpilogueBwd: return AddQkvEpilogueInputs(backend);
    case ProbeKind::kAttentionFwd:
    case ProbeKind::kAttentionBwd: return AddAttentionInputs(backend);
    case ProbeKind::kEmbeddingFwd:
    case ProbeKind::kEmbeddingBwd: return AddEmbeddingInputs(backend);
    case ProbeKind::kLossFwd:
    case ProbeKind::kLossBwd: return AddLossInputs(backend);
    case ProbeKind::kAdamW:  // main, grad, m, v [, model]
      PX_TRY(AddInput(backend, p.n, DType::kF32));
      PX_TRY(AddInput(backend, p.n, DType::kF32));
      PX_TRY(AddInput(backend, p.n, DType::kF32, false));
      PX_TRY(AddInput(backend, p.n, DType::kF32, false));
      if (d != DType::kF32) PX_TRY(AddInput(backend, p.n, d, false));
      break;
    case ProbeKind::kSumSquares:
      PX_TRY(AddInput(backend, p.n, DType::kF32));
      PX_TRY(AddInput(backend, 1, DType::kF64, false));
      break;
    case ProbeKind::kCast:
      PX_TRY(AddInput(backend, p.n, DType::kF32));
      PX_TRY(AddInput(backend, p.n, d, false));
      break;
    case ProbeKind::kCopy:
      PX_TRY(AddInput(backend, p.n, d));
      PX_TRY(AddInput(backend, p.n, d, false));
      break;
    case ProbeKind::kFill: PX_TRY(AddInput(backend, p.n, DType::kF32, false)); break;
    case ProbeKind::kAxpy:  // x, y
      PX_TRY(AddInput(backend, p.n, DType::kF32));
      PX_TRY(AddInput(backend, p.n, DType::kF32));
      break;
  }
  return {};
}

Status KernelProbe::AddColdSets(executor::Backend& backend) {
  const int64_t one = std::max<int64_t>(shape_.FootprintBytes(), 1);
  sets_ = static_cast<size_t>(std::clamp<int64_t>((kColdBytes + one - 1) / one, 1, 1024));
  for (size_t s = 1; s < sets_; ++s) {
    for (size_t i = 0; i < per_set_; ++i) {
      const executor::Tensor& src = tensors_[i];
      auto t = backend.Allocate(src.numel(), src.dtype(), executor::MemoryKind::kWorkspace);
      if (!t) {
        Release();
        return t.error();
      }
      backend.Copy({.dst = t->ptr(), .src = src.ptr(), .n = src.numel()});
      tensors_.push_back(std::move(*t));
    }
  }
  return {};
}

Status KernelProbe::Prepare(executor::Backend& backend) {
  if (!tensors_.empty()) return {};
  PX_TRY(AddInputs(backend));
  per_set_ = tensors_.size();
  set_ = 0;
  sets_ = 1;
  if (shape_.cold && per_set_ > 0) PX_TRY(AddColdSets(backend));
  return backend.Synchronize();
}

void KernelProbe::RunGemm(executor::Backend& be) {
  const ProbeShape& p = shape_;
  executor::GemmArgs g;
  g.ta = p.ta;
  g.tb = p.tb;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.beta = p.beta;
  g.a = T(0);
  g.b = T(1);
  g.c = T(2);
  g.lda = p.ta == executor::Trans::kNo ? p.k : p.m;
  g.ldb = p.tb == executor::Trans::kNo ? p.n : p.k;
  g.ldc = p.n;
  g.batch = p.batch;
  g.stride_a = p.m * p.k;
  g.stride_b = p.k * p.n;
  g.stride_c = p.m * p.n;
  be.Gemm(g);
}

void KernelProbe::RunNorm(executor::Backend& be) {
  const ProbeShape& p = shape_;
  if (p.kind == ProbeKind::kNormFwd) {
    if (p.rms) {
      be.RmsNormForward({.x = T(0), .gamma = T(1), .y = T(3), .rstd = T(5), .rows = p.rows, .cols = p.cols});
    } else {
      be.LayerNormForward({.x = T(0), .gamma = T(1), .beta = T(2), .y = T(3), .mean = T(4), .rstd = T(5),
                           .rows = p.rows, .cols = p.cols});
    }
  } else if (p.kind == ProbeKind::kResidualNormFwd) {
    const executor::DevPtr bias = p.bias ? T(7) : executor::DevPtr{};
    if (p.rms) {
      be.ResidualRmsNormForward({.x = T(0), .residual = T(6), .bias = bias, .gamma = T(1), .h = T(8), .y = T(3),
                                 .rstd = T(5), .rows = p.rows, .cols = p.cols});
    } else {
      be.ResidualLayerNormForward({.x = T(0), .residual = T(6), .bias = bias, .gamma = T(1), .beta = T(2),
                                   .h = T(8), .y = T(3), .mean = T(4), .rstd = T(5), .rows = p.rows, .cols = p.cols});
    }
  } else {
    if (p.rms) {
      be.RmsNormBackward({.dy = T(0), .x = T(1), .gamma = T(2), .rstd = T(4), .dx = T(5), .dgamma = T(6),
                          .rows = p.rows, .cols = p.cols});
    } else {
      be.LayerNormBackward({.dy = T(0), .x = T(1), .gamma = T(2), .mean = T(3), .rstd = T(4), .dx = T(5),
                            .dgamma = T(6), .dbeta = T(7), .rows = p.rows, .cols = p.cols});
    }
    be.Axpy({.y = T(8), .x = T(5), .n = p.rows * p.cols, .alpha = 1.0f});
  }
}

// As executor/runtime/transformer_layer.cpp runs the qkv op around its three GEMMs.
void KernelProbe::RunQkvEpilogue(executor::Backend& be) {
  const ProbeShape& p = shape_;
  const auto& a = p.attention;
  const int64_t rows = a.seq * a.batch, q = a.heads * a.head_dim, kv = a.kv_heads * a.head_dim;
  const bool bwd = p.kind == ProbeKind::kQkvEpilogueBwd;
  if (bwd && p.rotary) {
    be.Rotary(
        {.x = T(0), .seq = a.seq, .batch = a.batch, .heads = a.heads, .head_dim = a.head_dim, .inverse = true});
    be.Rotary(
        {.x = T(1), .seq = a.seq, .batch = a.batch, .heads = a.kv_heads, .head_dim = a.head_dim, .inverse = true});
  }
  if (p.bias) {
    for (size_t i = 0; i < 3; ++i) {
      const int64_t cols = i == 0 ? q : kv;
      if (bwd) {
        be.BiasBackward({.dy = T(i), .dbias = T(i + 3), .rows = rows, .cols = cols});
      } else {
        be.AddBias({.y = T(i), .bias = T(i + 3), .rows = rows, .cols = cols});
      }
    }
  }
  if (!bwd && p.rotary) {
    be.Rotary({.x = T(0), .seq = a.seq, .batch = a.batch, .heads = a.heads, .head_dim = a.head_dim});
    be.Rotary({.x = T(1), .seq = a.seq, .batch = a.batch, .heads = a.kv_heads, .head_dim = a.head_dim});
  }
}

// Parameters come in tensors of up to 1M elements, as a layer's weights do.
void KernelProbe::RunAdamW(executor::Backend& be) {
  const ProbeShape& p = shape_;
  constexpr int64_t kPiece = 1 << 20;
  std::vector<executor::AdamWTensor> ts;
  for (int64_t off = 0; off < p.n; off += kPiece) {
    executor::AdamWTensor a;
    a.n = std::min(kPiece, p.n - off);
    a.main = T(0) + off;
    a.grad = T(1) + off;
    a.m = T(2) + off;
    a.v = T(3) + off;
    if (tensors_.size() > 4) a.model = T(4) + off;
    a.decay = true;
    ts.push_back(a);
  }
  executor::AdamWParams ap;
  ap.lr = 1e-4;
  be.MultiTensorAdamW(ts, ap);
}

Status KernelProbe::Run(executor::Backend& be) {
  const ProbeShape& p = shape_;
  if (sets_ > 1) set_ = (set_ + 1) % sets_;
  switch (p.kind) {
    case ProbeKind::kGemm: RunGemm(be); break;
    case ProbeKind::kNormFwd:
    case ProbeKind::kResidualNormFwd:
    case ProbeKind::kNormBwd: RunNorm(be); break;
    case ProbeKind::kActFwd:
      if (p.swiglu) {
        be.SwigluForward({.gate = T(0), .up = T(1), .y = T(2), .n = p.n});
      } else {
        be.GeluForward({.x = T(0), .y = T(2), .n = p.n});
      }
      break;
    case ProbeKind::kActBwd:
      if (p.swiglu) {
        be.SwigluBackward({.gate = T(0), .up = T(1), .dy = T(2), .dgate = T(3), .dup = T(4), .n = p.n});
      } else {
        be.GeluBackward({.x = T(0), .dy = T(2), .dx = T(3), .n = p.n});
      }
      break;
    case ProbeKind::kResidualFwd:
      be.Copy({.dst = T(2), .src = T(0), .n = p.rows * p.cols});
      be.Axpy({.y = T(2), .x = T(1), .n = p.rows * p.cols, .alpha = 1.0f});
      if (p.bias) be.AddBias({.y = T(2), .bias = T(3), .rows = p.rows, .cols = p.cols});
      break;
    case ProbeKind::kResidualBwd:
      be.Copy({.dst = T(2), .src = T(0), .n = p.rows * p.cols});
      if (p.bias) be.BiasBackward({.dy = T(0), .dbias = T(3), .rows = p.rows, .cols = p.cols});
      break;
    case ProbeKind::kQkvEpilogueFwd:
    case ProbeKind::kQkvEpilogueBwd: RunQkvEpilogue(be); break;
    case ProbeKind::kAttentionFwd:
      be.AttentionForward({.shape = p.attention, .q = T(0), .k = T(1), .v = T(2), .out = T(3), .lse = T(4)});
      break;
    case ProbeKind::kAttentionBwd:
      be.AttentionBackward({.shape = p.attention, .q = T(0), .k = T(1), .v = T(2), .out = T(3), .lse = T(4),
                            .dout = T(5), .dq = T(6), .dk = T(7), .dv = T(8)});
      break;
    case ProbeKind::kEmbeddingFwd:
      be.EmbeddingForward(
          {.index = T(0), .table = T(1), .out = T(2), .n = p.rows, .table_rows = p.vocab_rows, .hidden = p.cols});
      if (p.positions) {
        be.EmbeddingForward({.index = T(3), .table = T(4), .out = T(2), .n = p.rows, .table_rows = p.rows,
                             .hidden = p.cols, .accumulate = true});
      }
      break;
    case ProbeKind::kEmbeddingBwd:
      if (p.positions) {
        be.EmbeddingBackward(
            {.index = T(3), .dout = T(1), .dtable = T(4), .n = p.rows, .table_rows = p.rows, .hidden = p.cols});
      }
      be.EmbeddingBackward(
          {.index = T(0), .dout = T(1), .dtable = T(2), .n = p.rows, .table_rows = p.vocab_rows, .hidden = p.cols});
      break;
    case ProbeKind::kLossFwd:  // as executor/runtime/embedding_head.cpp Head::Forward's loss op
      be.RowMax({.logits = T(0), .row_max = T(1), .rows = p.rows, .cols = p.vocab_rows});
      be.CrossEntropyStats({.logits = T(0), .row_max = T(1), .targets = T(2), .sum_exp = T(1) + p.rows,
                            .target_logit = T(1) + 2 * p.rows, .rows = p.rows, .cols = p.vocab_rows});
      break;
    case ProbeKind::kLossBwd:  // Head::Backward's: one slice's statistics combined, then the gradient
      be.CrossEntropyCombine(
          {.stats = T(1), .row_max = T(3), .sum_exp = T(4), .loss_sum = T(5), .rows = p.rows, .parts = 1});
      be.CrossEntropyBackward({.logits = T(0), .row_max = T(3), .sum_exp = T(4), .targets = T(2), .dlogits = T(6),
                               .rows = p.rows, .cols = p.vocab_rows, .scale = 1e-3f});
      break;
    case ProbeKind::kAdamW: RunAdamW(be); break;
    case ProbeKind::kSumSquares: {
      const executor::DevSpan span{T(0), p.n};
      be.MultiTensorSumSquares(std::span<const executor::DevSpan>(&span, 1), T(1));
      break;
    }
    case ProbeKind::kCast:
    case ProbeKind::kCopy: be.Copy({.dst = T(1), .src = T(0), .n = p.n}); break;
    case ProbeKind::kFill: be.Fill(T(0), p.n, 0.0f); break;
    // alpha 0: y stays what it was over any number of repetitions (the same bytes move).
    case ProbeKind::kAxpy: be.Axpy({.y = T(1), .x = T(0), .n = p.n, .alpha = 0.0f}); break;
  }
  return {};
}

}  // namespace parallax::profiler
