// CudaBackend's kernel entry points (the seam's typed kernels): argument checks, then the
// launchers of the .cu files (or cuBLASLt) on the compute stream.
#include <algorithm>
#include <cmath>
#include <string>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"
#include "model/implementation.h"

namespace parallax::executor {

using gpu::K;

namespace {

const int32_t* Ints(DevPtr p) { return static_cast<const int32_t*>(p.ptr); }

Error Misuse(const std::string& what) { return Error{"cuda backend: " + what, ErrorKind::kInternal}; }

}  // namespace

void CudaBackend::Gemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  auto ws = Scratch(0, kGemmWorkspaceBytes / 4, DType::kF32);
  if (!ws) return Fail(ws.error());
  if (Status s = gemm_->Run(g, Compute(), ws->ptr, static_cast<size_t>(kGemmWorkspaceBytes), allow_tf32_); !s) {
    Fail(s.error());
  }
}

void CudaBackend::Fill(DevPtr x, int64_t n, float value) { PX_CUDA_RECORD(gpu::LaunchFill(K(x), n, value, Compute())); }

void CudaBackend::Copy(const CopyArgs& a) {
  if (a.n <= 0 || a.dst.ptr == a.src.ptr) return;
  if (a.dst.dtype == a.src.dtype) {
    PX_CUDA_RECORD(cudaMemcpyAsync(a.dst.ptr, a.src.ptr, static_cast<size_t>(a.n * SizeOf(a.dst.dtype)),
                                   cudaMemcpyDeviceToDevice, Compute()));
    return;
  }
  PX_CUDA_RECORD(gpu::LaunchConvert(K(a.dst), K(a.src), a.n, Compute()));
}

void CudaBackend::Copy2D(const Copy2DArgs& a) {
  if (a.rows <= 0 || a.cols <= 0) return;
  if (a.accumulate || a.dst.dtype != a.src.dtype) return Backend::Copy2D(a);  // per row
  const auto e = static_cast<size_t>(SizeOf(a.dst.dtype));
  PX_CUDA_RECORD(cudaMemcpy2DAsync(a.dst.ptr, static_cast<size_t>(a.dst_ld) * e, a.src.ptr,
                                   static_cast<size_t>(a.src_ld) * e, static_cast<size_t>(a.cols) * e,
                                   static_cast<size_t>(a.rows), cudaMemcpyDeviceToDevice, Compute()));
}

void CudaBackend::Axpy(const AxpyArgs& a) { PX_CUDA_RECORD(gpu::LaunchAxpy(K(a.y), K(a.x), a.n, a.alpha, Compute())); }

void CudaBackend::AddBias(const BiasArgs& a) {
  PX_CUDA_RECORD(gpu::LaunchAddBias(K(a.y), K(a.bias), a.rows, a.cols, Compute()));
}

void CudaBackend::BiasBackward(const BiasBackwardArgs& a) {
  auto partials = Scratch(1, gpu::ColumnChunks(a.rows, a.cols) * a.cols, DType::kF32);
  if (!partials) return Fail(partials.error());
  PX_CUDA_RECORD(gpu::LaunchColumnSums(K(a.dy), K(a.dbias), a.rows, a.cols, static_cast<float*>(partials->ptr),
                                       Compute()));
}

void CudaBackend::LayerNormForward(const NormArgs& a) {
  PX_CUDA_RECORD(gpu::LaunchLayerNormForward(K(a.x), K(a.gamma), K(a.beta), K(a.y), K(a.mean), K(a.rstd), a.rows,
                                             a.cols, a.eps, Compute()));
}

void CudaBackend::LayerNormBackward(const NormBackwardArgs& a) {
  auto partials = Scratch(1, 2 * gpu::ColumnChunks(a.rows, a.cols) * a.cols, DType::kF32);
  if (!partials) return Fail(partials.error());
  PX_CUDA_RECORD(gpu::LaunchLayerNormBackward(K(a.dy), K(a.x), K(a.gamma), K(a.mean), K(a.rstd), K(a.dx),
                                              K(a.dgamma), K(a.dbeta), a.rows, a.cols,
                                              static_cast<float*>(partials->ptr), Compute()));
}

void CudaBackend::RmsNormForward(const NormArgs& a) {
  PX_CUDA_RECORD(
      gpu::LaunchRmsNormForward(K(a.x), K(a.gamma), K(a.y), K(a.rstd), a.rows, a.cols, a.eps, Compute()));
}

void CudaBackend::RmsNormBackward(const NormBackwardArgs& a) {
  auto partials = Scratch(1, 2 * gpu::ColumnChunks(a.rows, a.cols) * a.cols, DType::kF32);
  if (!partials) return Fail(partials.error());
  PX_CUDA_RECORD(gpu::LaunchRmsNormBackward(K(a.dy), K(a.x), K(a.gamma), K(a.rstd), K(a.dx), K(a.dgamma), a.rows,
                                            a.cols, static_cast<float*>(partials->ptr), Compute()));
}

void CudaBackend::GeluForward(const GeluArgs& a) { PX_CUDA_RECORD(gpu::LaunchGelu(K(a.x), K(a.y), a.n, Compute())); }

void CudaBackend::GeluBackward(const GeluBackwardArgs& a) {
  PX_CUDA_RECORD(gpu::LaunchGeluBackward(K(a.x), K(a.dy), K(a.dx), a.n, Compute()));
}

void CudaBackend::SwigluForward(const SwigluArgs& a) {
  PX_CUDA_RECORD(gpu::LaunchSwiglu(K(a.gate), K(a.up), K(a.y), a.n, Compute()));
}

void CudaBackend::SwigluBackward(const SwigluBackwardArgs& a) {
  PX_CUDA_RECORD(gpu::LaunchSwigluBackward(K(a.gate), K(a.up), K(a.dy), K(a.dgate), K(a.dup), a.n, Compute()));
}

void CudaBackend::Rotary(const RotaryArgs& a) {
  PX_CUDA_RECORD(gpu::LaunchRotary(K(a.x), a.seq, a.batch, a.heads, a.head_dim, a.first_position, a.inverse, Compute()));
}

namespace {

std::string CheckAttention(const AttentionShape& s) {
  if (s.batch < 1 || s.seq < 1 || s.heads < 1 || s.head_dim < 1) {
    return "attention: batch, seq, heads and head_dim must be positive";
  }
  if (s.kv_seq < 0) return "attention: kv_seq must be 0 (= seq) or positive";
  if (s.window < 0 || s.query_start < 0) return "attention: window and query_start must be >= 0";
  if (s.kv_heads < 1 || s.heads % s.kv_heads != 0) {
    return "attention: heads " + std::to_string(s.heads) + " is not a multiple of kv_heads " +
           std::to_string(s.kv_heads);
  }
  return {};
}

// Attention as strided-batched GEMMs. The GEMMs of query head h = kvh * G + g (G = heads /
// kv_heads) of sequence b form "item" j = b * kv_heads + kvh of group member g: q, out and dout of
// item j start at (j G + g) D and step by G D, k and v at j D stepping by D (rows: ld = batch x
// heads x D, resp. batch x kv_heads x D), and the row statistics (lse, delta: [seq*batch, heads])
// of item j at j G + g, row i at i batch heads. Items go in chunks whose S x keys fp32 scores fit
// 256 MiB (UnfusedAttentionChunkItems, model/implementation.h: the working set the planner charges).
struct AttnGeometry {
  int64_t S, Skv, D, G, items, ld_q, ld_kv, chunk;
  float scale;  //!< 1 / sqrt(head_dim), the CPU backend's ScaleOf
  AttentionShape shape;
  explicit AttnGeometry(const AttentionShape& s)
      : S(s.seq),
        Skv(s.keys()),
        D(s.head_dim),
        G(s.heads / s.kv_heads),
        items(s.batch * s.kv_heads),
        ld_q(s.batch * s.heads * s.head_dim),
        ld_kv(s.batch * s.kv_heads * s.head_dim),
        chunk(UnfusedAttentionChunkItems(s.seq, s.keys(), s.batch * s.kv_heads)),
        scale(1.0f / std::sqrt(static_cast<float>(s.head_dim))),
        shape(s) {}
  int64_t QOffset(int64_t j, int64_t g) const { return (j * G + g) * D; }
  int64_t StatOffset(int64_t j, int64_t g) const { return j * G + g; }
  int64_t ScoreFloats() const { return S * Skv; }
  gpu::AttnRowMask Mask() const {
    return {.seq = S, .keys = Skv, .causal = shape.causal, .offset = shape.causal_offset,
            .stat_row_stride = shape.batch * shape.heads, .stat_item_stride = G, .window = shape.window,
            .chunked = shape.chunked, .query_start = shape.query_start};
  }
};

GemmArgs Batched(int64_t n_items, int64_t m, int64_t n, int64_t k) {
  GemmArgs a;
  a.m = m;
  a.n = n;
  a.k = k;
  a.batch = n_items;
  return a;
}

//! scores = scale Q K^T (fp32, contiguous S x Skv per item) for items [j0, j0 + n) of member g.
GemmArgs ScoresGemm(const AttnGeometry& a, DevPtr q, DevPtr k, int64_t g, int64_t j0, int64_t n, DevPtr scores) {
  GemmArgs qk = Batched(n, a.S, a.Skv, a.D);
  qk.tb = Trans::kYes;
  qk.alpha = a.scale;
  qk.a = q + a.QOffset(j0, g), qk.lda = a.ld_q, qk.stride_a = a.G * a.D;
  qk.b = k + j0 * a.D, qk.ldb = a.ld_kv, qk.stride_b = a.D;
  qk.c = scores, qk.ldc = a.Skv, qk.stride_c = a.ScoreFloats();
  return qk;
}

//! C (+)= op(A) B over items [j0, j0 + n): A the chunk's contiguous S x Skv matrices, B and C rows of
//! the token tensors (`b_off`/`c_off` the item's first element, `b_step`/`c_step` between items).
struct ScoreProduct {
  DevPtr scores, b, c;
  int64_t ld_b, b_step, ld_c, c_step;
};
GemmArgs ProductGemm(const AttnGeometry& a, int64_t n, bool transpose_scores, const ScoreProduct& p, float beta) {
  GemmArgs g = transpose_scores ? Batched(n, a.Skv, a.D, a.S) : Batched(n, a.S, a.D, a.Skv);
  g.ta = transpose_scores ? Trans::kYes : Trans::kNo;
  g.beta = beta;
  g.a = p.scores, g.lda = a.Skv, g.stride_a = a.ScoreFloats();
  g.b = p.b, g.ldb = p.ld_b, g.stride_b = p.b_step;
  g.c = p.c, g.ldc = p.ld_c, g.stride_c = p.c_step;
  return g;
}

}  // namespace

void CudaBackend::AttentionForward(const AttentionArgs& args) {
  const DevPtr q = args.q, k = args.k, v = args.v, out = args.out;
  if (const std::string bad = CheckAttention(args.shape); !bad.empty()) return Fail(Misuse(bad));
  if (args.lse && args.lse.dtype != DType::kF32) return Fail(Misuse("AttentionForward: lse must be fp32"));
  last_attention_cudnn_ = want_cudnn_ && TryCudnnAttentionForward(args);
  if (last_attention_cudnn_) return;
  const AttnGeometry a(args.shape);
  auto scores = Scratch(4, a.chunk * a.ScoreFloats(), DType::kF32);
  if (!scores) return Fail(scores.error());
  auto p = Scratch(5, a.chunk * a.ScoreFloats(), q.dtype);
  if (!p) return Fail(p.error());
  DevPtr lse_buf = args.lse;
  if (!lse_buf) {  // statistics the caller does not keep
    auto unkept = Scratch(6, args.shape.stats_floats(), DType::kF32);
    if (!unkept) return Fail(unkept.error());
    lse_buf = *unkept;
  }
  float* lse = static_cast<float*>(lse_buf.ptr);
  for (int64_t g = 0; g < a.G; ++g) {
    for (int64_t j0 = 0; j0 < a.items; j0 += a.chunk) {
      const int64_t n = std::min(a.chunk, a.items - j0);
      Gemm(ScoresGemm(a, q, k, g, j0, n, *scores));
      PX_CUDA_RECORD(gpu::LaunchAttentionSoftmax(static_cast<const float*>(scores->ptr), K(*p), a.ScoreFloats(),
                                                 lse + a.StatOffset(j0, g), n, a.Mask(), Compute()));
      // out = P V
      Gemm(ProductGemm(a, n, false,
                       {.scores = *p, .b = v + j0 * a.D, .c = out + a.QOffset(j0, g), .ld_b = a.ld_kv, .b_step = a.D,
                        .ld_c = a.ld_q, .c_step = a.G * a.D},
                       0.0f));
    }
  }
}

void CudaBackend::AttentionBackward(const AttentionBackwardArgs& args) {
  const DevPtr q = args.q, k = args.k, v = args.v, dout = args.dout;
  const DevPtr dq = args.dq, dk = args.dk, dv = args.dv;
  if (const std::string bad = CheckAttention(args.shape); !bad.empty()) return Fail(Misuse(bad));
  if (args.lse.dtype != DType::kF32) return Fail(Misuse("AttentionBackward: lse must be fp32"));
  const AttnGeometry a(args.shape);
  // Slot 4: fp32 scores, then dP. Slot 5: P, then dS over it, in the activations' dtype. Slot 6: delta.
  auto f32 = Scratch(4, a.chunk * a.ScoreFloats(), DType::kF32);
  if (!f32) return Fail(f32.error());
  auto low = Scratch(5, a.chunk * a.ScoreFloats(), q.dtype);
  if (!low) return Fail(low.error());
  auto delta_buf = Scratch(6, args.shape.stats_floats(), DType::kF32);
  if (!delta_buf) return Fail(delta_buf.error());
  const float* lse = static_cast<const float*>(args.lse.ptr);
  float* delta = static_cast<float*>(delta_buf->ptr);
  PX_CUDA_RECORD(gpu::LaunchAttentionDelta(K(args.out), K(dout), delta, args.shape.stats_floats(), a.D, Compute()));
  const gpu::AttnRowMask mask = a.Mask();
  for (int64_t g = 0; g < a.G; ++g) {
    const float acc = g == 0 ? 0.0f : 1.0f;  // dk and dv sum over the group's query heads
    for (int64_t j0 = 0; j0 < a.items; j0 += a.chunk) {
      const int64_t n = std::min(a.chunk, a.items - j0);
      const DevPtr q_g = q + a.QOffset(j0, g), do_g = dout + a.QOffset(j0, g);
      // P = exp(scale Q K^T - lse)
      Gemm(ScoresGemm(a, q, k, g, j0, n, *f32));
      PX_CUDA_RECORD(gpu::LaunchAttentionProbs(static_cast<const float*>(f32->ptr), K(*low), a.ScoreFloats(),
                                               lse + a.StatOffset(j0, g), n, mask, Compute()));
      // dV (+)= P^T dO
      Gemm(ProductGemm(a, n, true,
                       {.scores = *low, .b = do_g, .c = dv + j0 * a.D, .ld_b = a.ld_q, .b_step = a.G * a.D,
                        .ld_c = a.ld_kv, .c_step = a.D},
                       acc));
      // dP = dO V^T (fp32)
      GemmArgs dpg = Batched(n, a.S, a.Skv, a.D);
      dpg.tb = Trans::kYes;
      dpg.a = do_g, dpg.lda = a.ld_q, dpg.stride_a = a.G * a.D;
      dpg.b = v + j0 * a.D, dpg.ldb = a.ld_kv, dpg.stride_b = a.D;
      dpg.c = *f32, dpg.ldc = a.Skv, dpg.stride_c = a.ScoreFloats();
      Gemm(dpg);
      // dS = P (dP - delta) scale, over P in slot 5
      PX_CUDA_RECORD(gpu::LaunchAttentionSoftmaxBackward(K(*low), a.ScoreFloats(), static_cast<const float*>(f32->ptr),
                                                         delta + a.StatOffset(j0, g), K(*low), a.ScoreFloats(), n,
                                                         mask, a.scale, Compute()));
      // dQ = dS K
      Gemm(ProductGemm(a, n, false,
                       {.scores = *low, .b = k + j0 * a.D, .c = dq + a.QOffset(j0, g), .ld_b = a.ld_kv,
                        .b_step = a.D, .ld_c = a.ld_q, .c_step = a.G * a.D},
                       0.0f));
      // dK (+)= dS^T Q
      Gemm(ProductGemm(a, n, true,
                       {.scores = *low, .b = q_g, .c = dk + j0 * a.D, .ld_b = a.ld_q, .b_step = a.G * a.D,
                        .ld_c = a.ld_kv, .c_step = a.D},
                       acc));
    }
  }
}

void CudaBackend::EmbeddingForward(const EmbeddingArgs& a) {
  if (a.index.dtype != DType::kI32) return Fail(Misuse("EmbeddingForward: indices must be int32"));
  PX_CUDA_RECORD(gpu::LaunchEmbeddingForward(Ints(a.index), a.n, K(a.table), a.vocab_begin, a.table_rows, a.hidden,
                                             K(a.out), a.accumulate, Compute()));
}

void CudaBackend::EmbeddingBackward(const EmbeddingBackwardArgs& a) {
  if (a.index.dtype != DType::kI32) return Fail(Misuse("EmbeddingBackward: indices must be int32"));
  PX_CUDA_RECORD(gpu::LaunchEmbeddingBackward(Ints(a.index), a.n, K(a.dout), a.vocab_begin, a.table_rows, a.hidden,
                                              K(a.dtable), Compute()));
}

void CudaBackend::RowMax(const RowMaxArgs& a) {
  PX_CUDA_RECORD(gpu::LaunchRowMax(K(a.logits), a.rows, a.cols, K(a.row_max), Compute()));
}

void CudaBackend::CrossEntropyStats(const CrossEntropyStatsArgs& a) {
  if (a.targets.dtype != DType::kI32) return Fail(Misuse("CrossEntropyStats: targets must be int32"));
  PX_CUDA_RECORD(gpu::LaunchCrossEntropyStats(K(a.logits), a.rows, a.cols, K(a.row_max), Ints(a.targets),
                                              a.vocab_begin, K(a.sum_exp), K(a.target_logit), Compute()));
}

void CudaBackend::CrossEntropyCombine(const CrossEntropyCombineArgs& a) {
  if (a.loss_sum.dtype != DType::kF64) return Fail(Misuse("CrossEntropyCombine: loss_sum must be fp64"));
  PX_CUDA_RECORD(gpu::LaunchCrossEntropyCombine(K(a.stats), a.rows, a.parts, K(a.row_max), K(a.sum_exp),
                                                static_cast<double*>(a.loss_sum.ptr), Compute()));
}

void CudaBackend::CrossEntropyBackward(const CrossEntropyBackwardArgs& a) {
  if (a.targets.dtype != DType::kI32) return Fail(Misuse("CrossEntropyBackward: targets must be int32"));
  PX_CUDA_RECORD(gpu::LaunchCrossEntropyBackward(K(a.logits), a.rows, a.cols, K(a.row_max), K(a.sum_exp),
                                                 Ints(a.targets), a.vocab_begin, a.scale, K(a.dlogits), Compute()));
}

void CudaBackend::AttentionMerge(const AttentionMergeArgs& a) {
  if (a.lse.dtype != DType::kF32 || a.block_lse.dtype != DType::kF32) {
    return Fail(Misuse("AttentionMerge: lse and block_lse must be fp32"));
  }
  PX_CUDA_RECORD(gpu::LaunchAttentionMerge(K(a.out), static_cast<float*>(a.lse.ptr), K(a.block_out),
                                           static_cast<const float*>(a.block_lse.ptr), a.rows, a.heads, a.head_dim,
                                           Compute()));
}

void CudaBackend::MultiTensorAdamW(std::span<const AdamWTensor> tensors, const AdamWParams& p) {
  // The scalars exactly as CpuBackend::AdamW derives them (optimizer_kernels.cpp).
  const double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(p.step));
  gpu::AdamWScalars sc{};
  sc.beta1 = static_cast<float>(p.beta1);
  sc.beta2 = static_cast<float>(p.beta2);
  sc.step_size = static_cast<float>(p.lr / bc1);
  sc.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  sc.eps = static_cast<float>(p.eps);
  sc.grad_scale = static_cast<float>(p.grad_scale);
  std::vector<gpu::AdamWItem> items;
  items.reserve(tensors.size());
  for (const AdamWTensor& t : tensors) {
    if (t.n == 0) continue;
    if (t.main.dtype != DType::kF32 || t.grad.dtype != DType::kF32 || t.m.dtype != DType::kF32 ||
        t.v.dtype != DType::kF32) {
      return Fail(Misuse("MultiTensorAdamW: main weights, gradients and moments must be fp32"));
    }
    gpu::AdamWItem it;
    it.main = static_cast<float*>(t.main.ptr);
    it.grad = static_cast<const float*>(t.grad.ptr);
    it.m = static_cast<float*>(t.m.ptr);
    it.v = static_cast<float*>(t.v.ptr);
    if (t.model && t.model.ptr != t.main.ptr) it.model = K(t.model);
    it.n = t.n;
    it.decay = static_cast<float>(1.0 - p.lr * (t.decay ? p.weight_decay : 0.0));
    items.push_back(it);
  }
  PX_CUDA_RECORD(gpu::LaunchAdamW(items.data(), static_cast<int>(items.size()), sc, Compute()));
}

void CudaBackend::MultiTensorSumSquares(std::span<const DevSpan> spans, DevPtr out) {
  if (out.dtype != DType::kF64) return Fail(Misuse("MultiTensorSumSquares: out must be fp64"));
  std::vector<gpu::SpanItem> items;
  items.reserve(spans.size());
  for (const DevSpan& s : spans) {
    if (s.n > 0) items.push_back(gpu::SpanItem{K(s.p), s.n});
  }
  const int64_t blocks = gpu::SumSquaresBlocks(items.data(), static_cast<int>(items.size()));
  if (blocks == 0) return;
  auto partials = Scratch(2, blocks, DType::kF64);
  if (!partials) return Fail(partials.error());
  auto* part = static_cast<double*>(partials->ptr);
  PX_CUDA_RECORD(gpu::LaunchSumSquaresPartials(items.data(), static_cast<int>(items.size()), part, Compute()));
  PX_CUDA_RECORD(gpu::LaunchSumPartials(part, blocks, static_cast<double*>(out.ptr), Compute()));
}

}  // namespace parallax::executor
