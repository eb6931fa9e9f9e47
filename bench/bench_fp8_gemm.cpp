// FP8 GEMM through the CUDA backend's seam (Fp8GemmArgs: E4M3 x E4M3, bf16 out, scale pointers,
// cached cuBLASLt plan) over cuBLASLt's FP8 matmul called directly with its top heuristic (ratio;
// aim >= 0.95), on the GEMM shapes of a GPT-1.3B layer at 2048 tokens and 8192^3. "TN" is the
// order cuBLASLt's FP8 kernels take (A m x k, B n x k: the forward linear layer); "NN" (B k x n)
// adds the seam's transpose of B, as a data-gradient GEMM pays it. Needs compute capability 8.9+.
// Times from CUDA events on the compute stream (manual time).
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "executor/backend_registry.h"
#include "executor/cuda/cuda_backend.h"

namespace parallax::executor {
namespace {

template <class F>
double TimeMs(cudaStream_t stream, int reps, F f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, stream);
  for (int i = 0; i < reps; ++i) f();
  cudaEventRecord(b, stream);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return static_cast<double>(ms) / reps;
}

// The baseline: row-major y = x W^T as column-major y^T = W x^T, E4M3 in, fp32 compute, bf16 out,
// A/B scale pointers, top heuristic, 32 MiB workspace.
struct DirectFp8Lt {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* ws = nullptr;
  size_t ws_bytes = size_t{32} << 20;
  bool ok = false;
  DirectFp8Lt(int64_t m, int64_t n, int64_t k, const float* w_scale, const float* x_scale) {
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale));
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n);
    cudaMalloc(&ws, ws_bytes);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    const uint64_t wsb = ws_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    ok = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, &r, &found) == CUBLAS_STATUS_SUCCESS &&
         found > 0;
    algo = r.algo;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  ~DirectFp8Lt() {
    cudaFree(ws);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(h);
  }
  void Run(const void* x, const void* w, void* y, cudaStream_t s) {
    const float alpha = 1, beta = 0;
    cublasLtMatmul(h, desc, &alpha, w, la, x, lb, &beta, y, lc, y, lc, &algo, ws, ws_bytes, s);
  }
};

// range(3): 1 = B given n x k (TN, no transpose), 0 = B given k x n (the seam transposes it).
void Fp8GemmBackendOverLt(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool tn = state.range(3) == 1;
  auto made = CreateBackend("cuda");
  if (!made) return state.SkipWithError(made.error().message.c_str());
  Backend& be = **made;
  auto* cb = dynamic_cast<CudaBackend*>(&be);
  auto x = be.Allocate(m * k, DType::kE4M3, MemoryKind::kActivations);
  auto w = be.Allocate(n * k, DType::kE4M3, MemoryKind::kWeights);
  auto y = be.Allocate(m * n, DType::kBf16, MemoryKind::kActivations);
  auto scales = be.Allocate(2, DType::kF32, MemoryKind::kWorkspace);
  if (!x || !w || !y || !scales) return state.SkipWithError("allocation failed");
  be.Fill(x->ptr(), m * k, 0.5f);
  be.Fill(w->ptr(), n * k, 0.25f);
  be.Fill(scales->ptr(), 2, 0.01f);
  const auto* x_scale = static_cast<const float*>(scales->ptr().ptr);
  const Fp8GemmArgs g{.tb = tn ? Trans::kYes : Trans::kNo, .m = m, .n = n, .k = k, .a = x->ptr(), .b = w->ptr(),
                      .c = y->ptr(), .a_scale_inv = scales->at(0), .b_scale_inv = scales->at(1), .lda = k,
                      .ldb = tn ? k : n, .ldc = n};
  DirectFp8Lt direct(m, n, k, x_scale + 1, x_scale);
  if (!direct.ok) {
    return state.SkipWithError("cuBLASLt has no FP8 algorithm for this shape (compute capability < 8.9?)");
  }
  const cudaStream_t s = cb->raw_stream(StreamKind::kCompute);
  be.Fp8Gemm(g);  // plan once
  direct.Run(x->ptr().ptr, w->ptr().ptr, y->ptr().ptr, s);
  double ms_backend = 0, ms_direct = 0;
  for (auto _ : state) {
    const double a = TimeMs(s, 20, [&] { be.Fp8Gemm(g); });
    const double b = TimeMs(s, 20, [&] { direct.Run(x->ptr().ptr, w->ptr().ptr, y->ptr().ptr, s); });
    ms_backend += a;
    ms_direct += b;
    state.SetIterationTime(a * 1e-3);
  }
  if (Status st = be.Synchronize(); !st) return state.SkipWithError(st.error().message.c_str());
  const double flops = 2.0 * static_cast<double>(m * n * k), iters = static_cast<double>(state.iterations());
  state.counters["backend_TFLOPs"] = flops / (ms_backend / iters * 1e-3) / 1e12;
  state.counters["direct_TFLOPs"] = flops / (ms_direct / iters * 1e-3) / 1e12;
  state.counters["ratio"] = ms_direct / ms_backend;
}
BENCHMARK(Fp8GemmBackendOverLt)
    ->ArgNames({"m", "n", "k", "tn"})
    ->Args({2048, 6144, 2048, 1})
    ->Args({2048, 2048, 2048, 1})
    ->Args({2048, 8192, 2048, 1})
    ->Args({2048, 2048, 8192, 1})
    ->Args({8192, 8192, 8192, 1})
    ->Args({8192, 8192, 8192, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace parallax::executor
