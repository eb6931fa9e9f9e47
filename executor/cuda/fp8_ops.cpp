// CudaBackend's FP8 entry points: the scaled cast, the delayed-scaling update and the FP8 GEMM
// through cuBLASLt (compute capability 8.9 or newer: Ada, Hopper, Blackwell), with the operands
// transposed to the K-major "TN" order its FP8 kernels take, and a fallback for shapes it declines.
#include <string>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"

namespace parallax::executor {

using gpu::K;

namespace {

Error Fp8Misuse(const std::string& what) { return Error{"cuda backend: " + what, ErrorKind::kInternal}; }

bool GemmDTypesOk(const Fp8GemmArgs& g) {
  return IsFp8(g.a.dtype) && IsFp8(g.b.dtype) && !(g.a.dtype == DType::kE5M2 && g.b.dtype == DType::kE5M2) &&
         (g.c.dtype == DType::kF32 || IsHalf(g.c.dtype)) && g.a_scale_inv && g.b_scale_inv;
}

}  // namespace

void CudaBackend::Fp8Cast(const Fp8CastArgs& a) {
  if (!IsFp8(a.y.dtype) || IsFp8(a.x.dtype) || !a.scale) {
    return Fail(Fp8Misuse("Fp8Cast needs a float x, an FP8 y and a scale"));
  }
  PX_CUDA_RECORD(gpu::LaunchFp8Cast(K(a.x), static_cast<const float*>(a.scale.ptr), K(a.y),
                                    static_cast<float*>(a.amax.ptr), a.n, Compute()));
}

void CudaBackend::Fp8ScaleUpdate(const Fp8ScaleUpdateArgs& a) {
  PX_CUDA_RECORD(gpu::LaunchFp8ScaleUpdate(static_cast<float*>(a.amax_history.ptr), static_cast<float*>(a.scale.ptr),
                                           static_cast<float*>(a.scale_inv.ptr), a.count, a.format, a.recipe,
                                           Compute()));
}

void CudaBackend::Fp8Gemm(const Fp8GemmArgs& args) {
  if (args.m == 0 || args.n == 0) return;
  if (!GemmDTypesOk(args)) {
    return Fail(Fp8Misuse(std::string("Fp8Gemm cannot take A ") + ToString(args.a.dtype) + ", B " +
                          ToString(args.b.dtype) + ", C " + ToString(args.c.dtype) + " (or a scale is missing)"));
  }
  if (compute_capability_ < 89) {
    return Fail(Error{"cuda backend: FP8 GEMMs need a GPU of compute capability 8.9 or newer (Ada, Hopper, "
                      "Blackwell); GPU " + std::to_string(device_) + " is sm_" + std::to_string(compute_capability_) +
                          "; use --precision bf16",
                      ErrorKind::kIo});
  }
  Fp8GemmArgs g = args;
  if (g.ta == Trans::kYes) {  // A stored k x m: make it m x k
    auto t = Scratch(9, g.m * g.k, g.a.dtype);
    if (!t) return Fail(t.error());
    PX_CUDA_RECORD(gpu::LaunchTransposeBytes(static_cast<const uint8_t*>(g.a.ptr), g.k, g.m, g.lda,
                                             static_cast<uint8_t*>(t->ptr), Compute()));
    g.a = *t;
    g.lda = g.k;
    g.ta = Trans::kNo;
  }
  if (g.tb == Trans::kNo) {  // B stored k x n: make it n x k
    auto t = Scratch(10, g.n * g.k, g.b.dtype);
    if (!t) return Fail(t.error());
    PX_CUDA_RECORD(gpu::LaunchTransposeBytes(static_cast<const uint8_t*>(g.b.ptr), g.k, g.n, g.ldb,
                                             static_cast<uint8_t*>(t->ptr), Compute()));
    g.b = *t;
    g.ldb = g.k;
    g.tb = Trans::kYes;
  }
  auto ws = Scratch(0, kGemmWorkspaceBytes / 4, DType::kF32);
  if (!ws) return Fail(ws.error());
  auto ran = gemm_->RunFp8(g, Compute(), ws->ptr, static_cast<size_t>(kGemmWorkspaceBytes));
  if (!ran) return Fail(ran.error());
  if (*ran) return;
  // No cuBLASLt algorithm for this shape: the plain kernel reads the codes unscaled into fp32,
  // then the epilogue applies alpha and both dequantization factors, and beta.
  auto acc = Scratch(11, g.m * g.n, DType::kF32);
  if (!acc) return Fail(acc.error());
  PX_CUDA_RECORD(gpu::LaunchGemmFallback(false, true, g.m, g.n, g.k, 1.0f, K(g.a), g.lda, 0, K(g.b), g.ldb, 0, 0.0f,
                                         K(*acc), g.n, 0, 1, Compute()));
  PX_CUDA_RECORD(gpu::LaunchFp8Epilogue(static_cast<const float*>(acc->ptr), g.m, g.n, g.alpha,
                                        static_cast<const float*>(g.a_scale_inv.ptr),
                                        static_cast<const float*>(g.b_scale_inv.ptr), g.beta, K(g.c), g.ldc,
                                        Compute()));
}

}  // namespace parallax::executor
