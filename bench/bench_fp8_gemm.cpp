// FP8 GEMM through the CUDA backend's seam (Fp8GemmArgs: E4M3 x E4M3, bf16 out, scale pointers,
// cached cuBLASLt plan) over cuBLASLt's FP8 matmul called directly with its top heuristic (ratio;
// aim >= 0.95), on the GEMM shapes of a GPT-1.3B layer at 2048 tokens and 8192^3. "TN" is the
// order cuBLASLt's FP8 kernels take (A m x k, B n x k: the forward linear layer); "NN" (B k x n)
// adds the seam's transpose of B, as a data-gradient GEMM pays it. Needs compute capability 8.9+.
// Times from CUDA events on the compute stream (manual time).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include "bench/cuda_baseline.h"
#include "executor/backend_registry.h"
#include "executor/cuda/cuda_backend.h"

namespace parallax::executor {
namespace {

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
  DirectLt direct(m, n, k, CUDA_R_8F_E4M3, x_scale + 1, x_scale);
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
