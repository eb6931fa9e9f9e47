// What the CUDA benchmarks measure the backend against: CUDA-event timing on a stream, and one
// cuBLASLt matmul called directly with its top heuristic (row-major y = x W^T expressed column-major
// as y^T = W x^T, fp32 compute, bf16 out, 32 MiB workspace). bench_cuda uses it with bf16 inputs,
// bench_fp8_gemm with E4M3 inputs and A/B scale pointers.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace parallax::executor {

//! Milliseconds between two events recorded around `f` on `stream`, per repetition.
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

//! The baseline matmul. `in` is the type of x and W (CUDA_R_16BF or CUDA_R_8F_E4M3); FP8 inputs
//! take device pointers to W's and x's scales. `ok` is false when cuBLASLt has no algorithm.
struct DirectLt {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* ws = nullptr;
  size_t ws_bytes = size_t{32} << 20;
  bool ok = false;
  DirectLt(int64_t m, int64_t n, int64_t k, cudaDataType_t in = CUDA_R_16BF, const float* w_scale = nullptr,
           const float* x_scale = nullptr) {
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
    if (w_scale != nullptr) {
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale));
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale));
    }
    cublasLtMatrixLayoutCreate(&la, in, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k);  // W: n x k row-major
    cublasLtMatrixLayoutCreate(&lb, in, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k);  // x: m x k row-major
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
  DirectLt(const DirectLt&) = delete;
  DirectLt& operator=(const DirectLt&) = delete;
  ~DirectLt() {
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

}  // namespace parallax::executor
