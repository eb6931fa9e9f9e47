// CudaBackend's attention forward through cuDNN's SDPA (cudnn_attention.h), with the GEMM path of
// cuda_kernels.cpp as the fallback: cuDNN writes [b, h, s, 1] statistics into scratch, one small
// kernel lays them out as the seam's [seq*batch, heads].
#include <string>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"

namespace parallax::executor {

bool CudaBackend::TryCudnnAttentionForward(const AttentionArgs& a) {
  const AttentionShape& s = a.shape;
  // What cuDNN's fused attention takes (cuDNN docs, Attention support matrix: fp16/bf16, d <= 256, d % 8).
  if (a.q.dtype == DType::kF32 || s.head_dim % 8 != 0 || s.head_dim > 256) return false;
  // Our cuDNN graph builds the causal mask only; local attention takes the GEMM path.
  if (s.causal && s.window > 0) return false;
  auto off = [&](const std::string& why) {
    cudnn_off_reason_ = why;
    want_cudnn_ = false;
    return false;
  };
  if (!cudnn_) {
    auto made = gpu::CudnnAttention::Create();
    if (!made) return off(made.error().message);
    cudnn_ = std::move(made).value();
  }
  auto stats = Scratch(7, s.stats_floats(), DType::kF32);
  if (!stats) return off(stats.error().message);
  DevPtr lse = a.lse;
  if (!lse) {
    auto unkept = Scratch(6, s.stats_floats(), DType::kF32);
    if (!unkept) return off(unkept.error().message);
    lse = *unkept;
  }
  auto* stats_f = static_cast<float*>(stats->ptr);
  const Status st = cudnn_->Forward(
      s, {.q = a.q, .k = a.k, .v = a.v, .out = a.out, .stats = stats_f}, Compute(), [&](int64_t bytes) -> Result<void*> {
        PX_ASSIGN(DevPtr w, Scratch(8, (bytes + 3) / 4, DType::kF32));
        return w.ptr;
      });
  if (!st) return off(st.error().message);
  PX_CUDA_RECORD(
      gpu::LaunchStatsToTokenMajor(stats_f, static_cast<float*>(lse.ptr), s.batch, s.heads, s.seq, Compute()));
  return true;
}

}  // namespace parallax::executor
