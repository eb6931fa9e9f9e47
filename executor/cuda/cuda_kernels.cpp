// CudaBackend's kernel entry points (the seam's typed kernels): argument checks, then the
// launchers of the .cu files (or cuBLASLt) on the compute stream.
#include <cmath>
#include <string>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"

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

void CudaBackend::Copy(DevPtr dst, DevPtr src, int64_t n) {
  if (n <= 0 || dst.ptr == src.ptr) return;
  if (dst.dtype == src.dtype) {
    PX_CUDA_RECORD(cudaMemcpyAsync(dst.ptr, src.ptr, static_cast<size_t>(n * SizeOf(dst.dtype)),
                                   cudaMemcpyDeviceToDevice, Compute()));
    return;
  }
  PX_CUDA_RECORD(gpu::LaunchConvert(K(dst), K(src), n, Compute()));
}

void CudaBackend::Axpy(DevPtr y, DevPtr x, int64_t n, float alpha) {
  PX_CUDA_RECORD(gpu::LaunchAxpy(K(y), K(x), n, alpha, Compute()));
}

void CudaBackend::AddBias(DevPtr y, DevPtr bias, int64_t rows, int64_t cols) {
  PX_CUDA_RECORD(gpu::LaunchAddBias(K(y), K(bias), rows, cols, Compute()));
}

void CudaBackend::BiasBackward(DevPtr dy, DevPtr dbias, int64_t rows, int64_t cols) {
  PX_CUDA_RECORD(gpu::LaunchColumnSums(K(dy), K(dbias), rows, cols, Compute()));
}

void CudaBackend::LayerNormForward(DevPtr x, DevPtr gamma, DevPtr beta, DevPtr y, DevPtr mean, DevPtr rstd,
                                   int64_t rows, int64_t cols, float eps) {
  PX_CUDA_RECORD(
      gpu::LaunchLayerNormForward(K(x), K(gamma), K(beta), K(y), K(mean), K(rstd), rows, cols, eps, Compute()));
}

void CudaBackend::LayerNormBackward(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr mean, DevPtr rstd, DevPtr dx,
                                    DevPtr dgamma, DevPtr dbeta, int64_t rows, int64_t cols) {
  PX_CUDA_RECORD(gpu::LaunchLayerNormBackward(K(dy), K(x), K(gamma), K(mean), K(rstd), K(dx), K(dgamma), K(dbeta),
                                              rows, cols, Compute()));
}

void CudaBackend::RmsNormForward(DevPtr x, DevPtr gamma, DevPtr y, DevPtr rstd, int64_t rows, int64_t cols,
                                 float eps) {
  PX_CUDA_RECORD(gpu::LaunchRmsNormForward(K(x), K(gamma), K(y), K(rstd), rows, cols, eps, Compute()));
}

void CudaBackend::RmsNormBackward(DevPtr dy, DevPtr x, DevPtr gamma, DevPtr rstd, DevPtr dx, DevPtr dgamma,
                                  int64_t rows, int64_t cols) {
  PX_CUDA_RECORD(
      gpu::LaunchRmsNormBackward(K(dy), K(x), K(gamma), K(rstd), K(dx), K(dgamma), rows, cols, Compute()));
}

void CudaBackend::GeluForward(DevPtr x, DevPtr y, int64_t n) { PX_CUDA_RECORD(gpu::LaunchGelu(K(x), K(y), n, Compute())); }

void CudaBackend::GeluBackward(DevPtr x, DevPtr dy, DevPtr dx, int64_t n) {
  PX_CUDA_RECORD(gpu::LaunchGeluBackward(K(x), K(dy), K(dx), n, Compute()));
}

void CudaBackend::SwigluForward(DevPtr gate, DevPtr up, DevPtr y, int64_t n) {
  PX_CUDA_RECORD(gpu::LaunchSwiglu(K(gate), K(up), K(y), n, Compute()));
}

void CudaBackend::SwigluBackward(DevPtr gate, DevPtr up, DevPtr dy, DevPtr dgate, DevPtr dup, int64_t n) {
  PX_CUDA_RECORD(gpu::LaunchSwigluBackward(K(gate), K(up), K(dy), K(dgate), K(dup), n, Compute()));
}

void CudaBackend::Rotary(DevPtr x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, bool inverse) {
  PX_CUDA_RECORD(gpu::LaunchRotary(K(x), seq, batch, heads, head_dim, inverse, Compute()));
}

namespace {

gpu::AttnDims DimsOf(const AttentionShape& s) {
  return gpu::AttnDims{s.batch, s.seq, s.heads, s.kv_heads, s.head_dim};
}

std::string CheckAttention(const AttentionShape& s) {
  if (s.head_dim < 1 || s.head_dim > gpu::kMaxAttentionHeadDim) {
    return "attention: head_dim " + std::to_string(s.head_dim) + " is outside the tiled kernel's range [1, " +
           std::to_string(gpu::kMaxAttentionHeadDim) + "]";
  }
  if (s.kv_heads < 1 || s.heads % s.kv_heads != 0) {
    return "attention: heads " + std::to_string(s.heads) + " is not a multiple of kv_heads " +
           std::to_string(s.kv_heads);
  }
  return {};
}

}  // namespace

void CudaBackend::AttentionForward(const AttentionShape& s, DevPtr q, DevPtr k, DevPtr v, DevPtr out, DevPtr probs) {
  if (const std::string bad = CheckAttention(s); !bad.empty()) return Fail(Misuse(bad));
  PX_CUDA_RECORD(gpu::LaunchAttentionForward(DimsOf(s), K(q), K(k), K(v), K(out), K(probs), Compute()));
}

void CudaBackend::AttentionBackward(const AttentionShape& s, DevPtr q, DevPtr k, DevPtr v, DevPtr /*probs*/,
                                    DevPtr dout, DevPtr dq, DevPtr dk, DevPtr dv) {
  // Kept probabilities are not read: the tiled backward recomputes P from q, k and the row
  // log-sum-exp, which is cheaper than streaming S x S values back from memory and is exact in fp32.
  if (const std::string bad = CheckAttention(s); !bad.empty()) return Fail(Misuse(bad));
  const gpu::AttnDims d = DimsOf(s);
  auto scratch = Scratch(1, gpu::AttentionBackwardScratchFloats(d), DType::kF32);
  if (!scratch) return Fail(scratch.error());
  PX_CUDA_RECORD(gpu::LaunchAttentionBackward(d, K(q), K(k), K(v), K(dout), K(dq), K(dk), K(dv),
                                              static_cast<float*>(scratch->ptr), Compute()));
}

void CudaBackend::EmbeddingForward(DevPtr index, int64_t n, DevPtr table, int64_t vocab_begin, int64_t table_rows,
                                   int64_t hidden, DevPtr out, bool accumulate) {
  if (index.dtype != DType::kI32) return Fail(Misuse("EmbeddingForward: indices must be int32"));
  PX_CUDA_RECORD(gpu::LaunchEmbeddingForward(Ints(index), n, K(table), vocab_begin, table_rows, hidden, K(out),
                                             accumulate, Compute()));
}

void CudaBackend::EmbeddingBackward(DevPtr index, int64_t n, DevPtr dout, int64_t vocab_begin, int64_t table_rows,
                                    int64_t hidden, DevPtr dtable) {
  if (index.dtype != DType::kI32) return Fail(Misuse("EmbeddingBackward: indices must be int32"));
  PX_CUDA_RECORD(gpu::LaunchEmbeddingBackward(Ints(index), n, K(dout), vocab_begin, table_rows, hidden, K(dtable),
                                              Compute()));
}

void CudaBackend::RowMax(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max) {
  PX_CUDA_RECORD(gpu::LaunchRowMax(K(logits), rows, cols, K(row_max), Compute()));
}

void CudaBackend::CrossEntropyStats(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max, DevPtr targets,
                                    int64_t vocab_begin, DevPtr sum_exp, DevPtr target_logit) {
  if (targets.dtype != DType::kI32) return Fail(Misuse("CrossEntropyStats: targets must be int32"));
  PX_CUDA_RECORD(gpu::LaunchCrossEntropyStats(K(logits), rows, cols, K(row_max), Ints(targets), vocab_begin,
                                              K(sum_exp), K(target_logit), Compute()));
}

void CudaBackend::CrossEntropyLoss(DevPtr row_max, DevPtr sum_exp, DevPtr target_logit, int64_t rows,
                                   DevPtr loss_sum) {
  if (loss_sum.dtype != DType::kF64) return Fail(Misuse("CrossEntropyLoss: loss_sum must be fp64"));
  PX_CUDA_RECORD(gpu::LaunchCrossEntropyLoss(K(row_max), K(sum_exp), K(target_logit), rows,
                                             static_cast<double*>(loss_sum.ptr), Compute()));
}

void CudaBackend::CrossEntropyBackward(DevPtr logits, int64_t rows, int64_t cols, DevPtr row_max, DevPtr sum_exp,
                                       DevPtr targets, int64_t vocab_begin, float scale, DevPtr dlogits) {
  if (targets.dtype != DType::kI32) return Fail(Misuse("CrossEntropyBackward: targets must be int32"));
  PX_CUDA_RECORD(gpu::LaunchCrossEntropyBackward(K(logits), rows, cols, K(row_max), K(sum_exp), Ints(targets),
                                                 vocab_begin, scale, K(dlogits), Compute()));
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
