// GEMM through OpenBLAS's cblas interface (row-major), single-threaded inside, split across the
// rank's kernel threads (executor/cpu/kernel_threads.h) by blocks of rows (or of columns when there
// are few rows).
//
// Why not OpenBLAS's own threads: they take fixed shares of the matrix, so a GEMM waits for its
// slowest thread, and on a machine where something else holds a core (a compiler, a second job,
// ctest -j) a descheduled worker holds every GEMM up by a scheduler slice: gpt-tiny with 2 threads
// on a 2-core VM under a 2-job build ran at 0.5-1.3 s per step against 10-14 ms with one thread.
// Our pool's caller runs whatever chunks no worker has taken, so a late worker costs at most one
// chunk (bench/bench_cpu_kernels.cpp, KernelThreads ops 3 and 4, compares the two on an idle machine).
#include <cblas.h>

#include <algorithm>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/kernel_threads.h"

namespace parallax::executor {
namespace {

// Below this many floating-point operations one call on the calling thread beats a round trip
// through the pool (about 10 us).
constexpr double kSplitFlops = 4.0e6;
// Rows (or columns) per chunk: about a quarter of the extent, a multiple of 16 (the AVX-512 sgemm
// kernels' tile), 64 to 512, so that a few chunks exist to share out. Chosen from the shape alone,
// so the result never depends on the number of threads.
int64_t BlockOf(int64_t extent) { return std::clamp<int64_t>((extent / 4 + 15) / 16 * 16, 64, 512); }
int64_t ChunksOf(int64_t extent) { return (extent + BlockOf(extent) - 1) / BlockOf(extent); }

void Sgemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta == Trans::kYes ? CblasTrans : CblasNoTrans,
              tb == Trans::kYes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

}  // namespace

void CpuBackend::Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  // Each chunk packs its own share of one operand and all of the other: split the extent whose
  // other operand costs less to pack again per chunk (rows: B, k x n; columns: A, m x k).
  const bool rows_ok = m >= 2 * BlockOf(m), cols_ok = n >= 2 * BlockOf(n);
  const bool by_rows = rows_ok && (!cols_ok || ChunksOf(m) * n <= ChunksOf(n) * m);
  const bool by_cols = !by_rows && cols_ok;
  if (KernelThreads() <= 1 || flops < kSplitFlops || (!by_rows && !by_cols)) {
    Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (by_rows) {  // rows [r0, r1) of op(A) and of C
    ParallelFor(m, BlockOf(m), [&](int64_t r0, int64_t r1) {
      const float* a0 = ta == Trans::kYes ? a + r0 : a + r0 * lda;
      Sgemm(ta, tb, r1 - r0, n, k, alpha, a0, lda, b, ldb, beta, c + r0 * ldc, ldc);
    });
    return;
  }
  ParallelFor(n, BlockOf(n), [&](int64_t c0, int64_t c1) {  // columns [c0, c1) of op(B) and of C
    const float* b0 = tb == Trans::kYes ? b + c0 * ldb : b + c0;
    Sgemm(ta, tb, m, c1 - c0, k, alpha, a, lda, b0, ldb, beta, c + c0, ldc);
  });
}

}  // namespace parallax::executor
