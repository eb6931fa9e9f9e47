#include "executor/cuda/lt_gemm.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"

namespace parallax::executor::gpu {
namespace {

cudaDataType_t LtType(DType t) {
  switch (t) {
    case DType::kBf16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    case DType::kF64: return CUDA_R_64F;
    case DType::kE4M3: return CUDA_R_8F_E4M3;
    case DType::kE5M2: return CUDA_R_8F_E5M2;
    default: return CUDA_R_32F;
  }
}

// Largest power of two (<= 256) dividing every address and stride in bytes (cuBLASLt's
// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES).
int AlignmentOfBytes(std::initializer_list<uint64_t> values) {
  uint64_t bits = 256;
  for (uint64_t v : values) {
    if (v != 0) bits = std::min<uint64_t>(bits, v & (~v + 1));
  }
  return static_cast<int>(bits);
}

uint64_t Address(DevPtr p) { return reinterpret_cast<uintptr_t>(p.ptr); }

int AlignmentOf(const GemmArgs& g) {
  return AlignmentOfBytes({Address(g.a), Address(g.b), Address(g.c),
                           static_cast<uint64_t>(g.stride_a * SizeOf(g.a.dtype)),
                           static_cast<uint64_t>(g.stride_b * SizeOf(g.b.dtype)),
                           static_cast<uint64_t>(g.stride_c * SizeOf(g.c.dtype))});
}

template <class T>
cublasStatus_t SetMatmul(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  return cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v));
}

template <class T>
cublasStatus_t SetLayout(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& v) {
  return cublasLtMatrixLayoutSetAttribute(l, attr, &v, sizeof(v));
}

// A column-major layout rows x cols with leading dimension ld, batched with `stride` elements.
Result<LtLayoutPtr> Layout(DType t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t raw = nullptr;
  PX_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&raw, LtType(t), static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  LtLayoutPtr l(raw);
  if (batch > 1) {
    PX_CUBLAS_TRY(SetLayout(l.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch)));
    PX_CUBLAS_TRY(SetLayout(l.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride));
  }
  return l;
}

}  // namespace

Result<std::unique_ptr<LtGemm>> LtGemm::Create() {
  cublasLtHandle_t h = nullptr;
  PX_CUBLAS_TRY(cublasLtCreate(&h));
  return std::unique_ptr<LtGemm>(new LtGemm(LtHandlePtr(h)));
}

Status LtGemm::ChooseAlgorithm(Plan& p, size_t workspace_bytes, int alignment) {
  cublasLtMatmulPreference_t pref_raw = nullptr;
  PX_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref_raw));
  LtPreferencePtr pref(pref_raw);
  const uint64_t ws = workspace_bytes;
  PX_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                     sizeof(ws)));
  const uint32_t align = static_cast<uint32_t>(alignment);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    PX_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref.get(), attr, &align, sizeof(align)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_.get(), p.desc.get(), p.a.get(), p.b.get(), p.c.get(),
                                                           p.c.get(), pref.get(), 1, &result, &found);
  // NOT_SUPPORTED / no result: this shape takes the fallback kernel.
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
    return CublasError(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  }
  p.has_algo = st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (p.has_algo) p.algo = result.algo;
  return {};
}

Result<LtGemm::Plan*> LtGemm::PlanFor(const Key& key, const GemmArgs& g, size_t workspace_bytes, bool allow_tf32,
                                      int alignment) {
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  Plan p;
  const bool half = IsHalf(g.a.dtype);
  const cublasComputeType_t compute =
      half ? CUBLAS_COMPUTE_32F : (allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  cublasLtMatmulDesc_t desc = nullptr;
  PX_CUBLAS_TRY(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  p.desc.reset(desc);
  // Column-major view: C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m); the first operand is B.
  const cublasOperation_t op_first = g.tb == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.ta == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  PX_CUBLAS_TRY(SetMatmul(desc, CUBLASLT_MATMUL_DESC_TRANSA, op_first));
  PX_CUBLAS_TRY(SetMatmul(desc, CUBLASLT_MATMUL_DESC_TRANSB, op_second));
  // Stored (column-major) shapes: B row-major k x n (or n x k when transposed) is n x k (k x n).
  auto first = Layout(g.b.dtype, g.tb == Trans::kYes ? g.k : g.n, g.tb == Trans::kYes ? g.n : g.k, g.ldb, g.batch,
                      g.stride_b);
  if (!first) return first.error();
  auto second = Layout(g.a.dtype, g.ta == Trans::kYes ? g.m : g.k, g.ta == Trans::kYes ? g.k : g.m, g.lda, g.batch,
                       g.stride_a);
  if (!second) return second.error();
  auto out = Layout(g.c.dtype, g.n, g.m, g.ldc, g.batch, g.stride_c);
  if (!out) return out.error();
  p.a = std::move(first).value();
  p.b = std::move(second).value();
  p.c = std::move(out).value();

  if (Status st = ChooseAlgorithm(p, workspace_bytes, alignment); !st) return st.error();
  if (!p.has_algo) ++fallbacks_;
  auto [it, inserted] = plans_.emplace(key, std::move(p));
  return &it->second;
}

Status LtGemm::Run(const GemmArgs& g, cudaStream_t stream, void* workspace, size_t workspace_bytes, bool allow_tf32) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return {};
  if (g.a.dtype != g.b.dtype) return Error{"Gemm: A and B must share a dtype", ErrorKind::kInternal};
  const int alignment = AlignmentOf(g);
  const Key key{static_cast<int64_t>(g.ta), static_cast<int64_t>(g.tb), g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch,
                g.stride_a, g.stride_b, g.stride_c, static_cast<int64_t>(g.a.dtype), static_cast<int64_t>(g.c.dtype),
                alignment, allow_tf32 ? 1 : 0, static_cast<int64_t>(workspace_bytes)};
  auto plan = PlanFor(key, g, workspace_bytes, allow_tf32, alignment);
  if (!plan) return plan.error();
  Plan& p = **plan;
  if (!p.has_algo || g.k == 0) {
    PX_CUDA_TRY(LaunchGemmFallback(g.ta == Trans::kYes, g.tb == Trans::kYes, g.m, g.n, g.k, g.alpha, K(g.a), g.lda,
                                   g.stride_a, K(g.b), g.ldb, g.stride_b, g.beta, K(g.c), g.ldc, g.stride_c, g.batch,
                                   stream));
    return {};
  }
  PX_CUBLAS_TRY(cublasLtMatmul(handle_.get(), p.desc.get(), &g.alpha, g.b.ptr, p.a.get(), g.a.ptr, p.b.get(), &g.beta,
                               g.c.ptr, p.c.get(), g.c.ptr, p.c.get(), &p.algo, workspace, workspace_bytes, stream));
  return {};
}

}  // namespace parallax::executor::gpu

namespace parallax::executor::gpu {

Result<LtGemm::Plan*> LtGemm::Fp8PlanFor(const Key& key, const Fp8GemmArgs& g, size_t workspace_bytes, int alignment) {
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  Plan p;
  cublasLtMatmulDesc_t desc = nullptr;
  PX_CUBLAS_TRY(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  p.desc.reset(desc);
  // Column-major view as in PlanFor: cuBLASLt's A is our B (n x k, K-major: transposed), its B is
  // our A (m x k, K-major: not transposed), the "TN" its FP8 kernels require.
  PX_CUBLAS_TRY(SetMatmul(desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  PX_CUBLAS_TRY(SetMatmul(desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  auto first = Layout(g.b.dtype, g.k, g.n, g.ldb, 1, 0);
  if (!first) return first.error();
  auto second = Layout(g.a.dtype, g.k, g.m, g.lda, 1, 0);
  if (!second) return second.error();
  auto out = Layout(g.c.dtype, g.n, g.m, g.ldc, 1, 0);
  if (!out) return out.error();
  p.a = std::move(first).value();
  p.b = std::move(second).value();
  p.c = std::move(out).value();
  if (Status st = ChooseAlgorithm(p, workspace_bytes, alignment); !st) return st.error();
  if (!p.has_algo) ++fallbacks_;
  auto [it, inserted] = plans_.emplace(key, std::move(p));
  return &it->second;
}

Result<bool> LtGemm::RunFp8(const Fp8GemmArgs& g, cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  if (g.ta != Trans::kNo || g.tb != Trans::kYes) {
    return Error{"Fp8Gemm: cuBLASLt's FP8 kernels take A as m x k and B as n x k (\"TN\"); transpose first",
                 ErrorKind::kInternal};
  }
  const int alignment =
      AlignmentOfBytes({Address(g.a), Address(g.b), Address(g.c), static_cast<uint64_t>(g.lda),
                        static_cast<uint64_t>(g.ldb), static_cast<uint64_t>(g.ldc * SizeOf(g.c.dtype))});
  // -1 first: an FP8 plan never shares a key with a GemmArgs plan (whose first entry is 0 or 1).
  const Key key{-1, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, static_cast<int64_t>(g.a.dtype),
                static_cast<int64_t>(g.b.dtype), static_cast<int64_t>(g.c.dtype), alignment,
                static_cast<int64_t>(workspace_bytes)};
  auto plan = Fp8PlanFor(key, g, workspace_bytes, alignment);
  if (!plan) return plan.error();
  Plan& p = **plan;
  if (!p.has_algo) return false;
  // D = alpha * scale_A * scale_B * op(A) op(B) + beta * C with cuBLASLt's A = our B: the scale
  // pointers are the dequantization factors, read on the device when the kernel runs.
  const void* first_scale = g.b_scale_inv.ptr;
  const void* second_scale = g.a_scale_inv.ptr;
  PX_CUBLAS_TRY(SetMatmul(p.desc.get(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, first_scale));
  PX_CUBLAS_TRY(SetMatmul(p.desc.get(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, second_scale));
  PX_CUBLAS_TRY(cublasLtMatmul(handle_.get(), p.desc.get(), &g.alpha, g.b.ptr, p.a.get(), g.a.ptr, p.b.get(), &g.beta,
                               g.c.ptr, p.c.get(), g.c.ptr, p.c.get(), &p.algo, workspace, workspace_bytes, stream));
  return true;
}

}  // namespace parallax::executor::gpu
