// GEMM through OpenBLAS's cblas interface (row-major).
#include <cblas.h>

#include "executor/cpu/cpu_backend.h"

namespace parallax::executor {

void CpuBackend::Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, ta == Trans::kYes ? CblasTrans : CblasNoTrans,
              tb == Trans::kYes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

}  // namespace parallax::executor
