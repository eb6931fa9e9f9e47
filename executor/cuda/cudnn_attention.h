#pragma once
// Flash attention forward through cuDNN 9's graph (backend) API: the scaled-dot-product-attention
// pattern (Q K^T, scale, the causal mask of AttentionShape, softmax with its fp32 statistics, P V)
// as one operation graph that cuDNN's fused attention engines run (FlashAttention-2, Dao 2023).
// Plans are built once per shape and cached, as the cuBLASLt GEMMs are; the workspace comes from
// the caller (the backend's allocator). Q, K, V and O are our [seq*batch, heads*D] tensors, given to
// cuDNN as [b, h, s, d] with strides (its BSHD/"sbhd" layouts); the statistics leave cuDNN as
// [b, h, s, 1] fp32, which the caller turns into the seam's [seq*batch, heads].
//
// Not yet run on a GPU (docs/cuda.md "What the GPU checks run", scripts/gpu_checks.sh step cudnn):
// the backend uses it only when PARALLAX_ATTENTION=cudnn, and falls back to its GEMM path, with
// the reason kept, when cuDNN is missing or refuses the graph.

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "executor/backend.h"
#include "executor/cuda/cudnn_library.h"

namespace parallax::executor::gpu {

//! The device operands of one SDPA forward call.
struct SdpaForwardOperands {
  [[no_unique_address]] ByName by_name{};
  DevPtr q{}, k{}, v{}, out{};
  float* stats = nullptr;  //!< [batch, heads, seq, 1] fp32, contiguous
};

class CudnnAttention {
 public:
  //! Scratch of at least `bytes` bytes (the backend's allocator), or an error.
  using Workspace = std::function<Result<void*>(int64_t bytes)>;

  //! Loads cuDNN (cudnn_library.h) and creates a handle on the current device.
  static Result<std::unique_ptr<CudnnAttention>> Create();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  //! Enqueues the forward on `stream`. An error (no engine for this shape, a failed launch) leaves
  //! the outputs unwritten; the caller falls back.
  Status Forward(const AttentionShape& s, const SdpaForwardOperands& x, cudaStream_t stream, const Workspace& ws);
  const CudnnApi& api() const { return *api_; }

 private:
  struct Plan;
  //! (dtype, batch, seq, keys, heads, kv_heads, head_dim, causal, causal_offset)
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int64_t>;
  CudnnAttention(const CudnnApi* api, cudnnHandle_t handle);
  Result<Plan*> PlanFor(const AttentionShape& s, DType dt);

  const CudnnApi* api_;
  cudnnHandle_t handle_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace parallax::executor::gpu
