#pragma once
// GEMMs of the CUDA backend through cuBLASLt (row-major GemmArgs mapped onto column-major
// cuBLASLt by computing C^T = op(B)^T op(A)^T). bf16/fp16 inputs accumulate in fp32 (C fp32 or the
// input dtype); fp32 inputs use CUBLAS_COMPUTE_32F, i.e. no TF32, unless TF32 is allowed.
// Descriptors and the heuristic's algorithm are cached per shape (dtypes, transposes, sizes,
// leading dimensions, batch and strides, pointer alignment); a shape for which cuBLASLt offers no
// algorithm runs the fallback kernel of gemm_fallback.cu.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/cuda_handles.h"

namespace parallax::executor::gpu {

class LtGemm {
 public:
  //! Creates the cuBLASLt handle.
  static Result<std::unique_ptr<LtGemm>> Create();
  //! Enqueues `g` on `stream`; `workspace` (bytes) is scratch for the chosen algorithm.
  Status Run(const GemmArgs& g, cudaStream_t stream, void* workspace, size_t workspace_bytes, bool allow_tf32);
  //! Enqueues an FP8 GEMM (cuBLASLt FP8 matmul, fp32 compute, the operands' scale_inv as
  //! CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER) whose operands are K-major: g.ta kNo, g.tb kYes.
  //! false: cuBLASLt offers no algorithm for this shape (the caller runs the fallback).
  Result<bool> RunFp8(const Fp8GemmArgs& g, cudaStream_t stream, void* workspace, size_t workspace_bytes);
  //! Shapes planned so far and those that fell back to the plain kernel (for tests and benchmarks).
  int64_t planned_shapes() const { return static_cast<int64_t>(plans_.size()); }
  int64_t fallback_shapes() const { return fallbacks_; }

 private:
  explicit LtGemm(LtHandlePtr h) : handle_(std::move(h)) {}
  using Key = std::vector<int64_t>;
  struct Plan {
    LtMatmulDescPtr desc;
    LtLayoutPtr a, b, c;
    cublasLtMatmulAlgo_t algo{};
    bool has_algo = false;
  };
  Result<Plan*> PlanFor(const Key& key, const GemmArgs& g, size_t workspace_bytes, bool allow_tf32, int alignment);
  Result<Plan*> Fp8PlanFor(const Key& key, const Fp8GemmArgs& g, size_t workspace_bytes, int alignment);
  //! The heuristic's first algorithm for p's descriptors (p.has_algo false when it offers none).
  Status ChooseAlgorithm(Plan& p, size_t workspace_bytes, int alignment);

  LtHandlePtr handle_;
  std::map<Key, Plan> plans_;
  int64_t fallbacks_ = 0;
};

}  // namespace parallax::executor::gpu
