// Causal softmax attention with grouped-query heads, forward and backward (Vaswani et al. 2017),
// computed per (sequence, head) in blocks of query rows through BLAS: scores = scale Q K^T and
// out = P V as GEMMs over the causal prefix of each block, the softmax rows with the SIMD loops of
// vector_kernels.cpp. Backward: dP = dO V^T, dS = P (dP - rowsum(P dP)) scale, dQ = dS K,
// dK += dS^T Q, dV += P^T dO, again over the causal blocks only. Scratch: blocks of rows, O(64 S).
// With several intra-op threads (kernel_threads.h) the (sequence, head) pairs are spread over them,
// BLAS single-threaded inside; backward spreads (sequence, kv head) groups so that each dK/dV slice
// is accumulated by one thread over its query heads in order: results equal the serial loop's.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/kernel_threads.h"
#include "executor/cpu/vector_kernels.h"

namespace parallax::executor {
namespace {

// Query rows per block: a block's GEMMs cover columns [0, block end), so a smaller block wastes
// less of the masked upper triangle and a larger one makes bigger GEMMs.
constexpr int64_t kBlock = 64;

// One (sequence, head): base pointers into the [S*B, heads*D] / [S*B, kv_heads*D] tensors and
// their row strides (consecutive positions of one sequence are B rows apart).
struct HeadView {
  int64_t ld_q, ld_kv;
  int64_t q_off, kv_off;
};

HeadView ViewOf(const AttentionShape& s, int64_t b, int64_t h) {
  const int64_t q_row = s.heads * s.head_dim, kv_row = s.kv_heads * s.head_dim;
  const int64_t kvh = h / (s.heads / s.kv_heads);
  return {s.batch * q_row, s.batch * kv_row, b * q_row + h * s.head_dim,
          b * kv_row + kvh * s.head_dim};
}

float ScaleOf(const AttentionShape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

void Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

// Rows [i0, i1) of the causal softmax of one head into dst (row r of dst is query row i0 + r,
// leading dimension S): row i holds softmax over columns [0, i] and zeros after.
void SoftmaxBlock(const AttentionShape& s, const HeadView& hv, const float* q, const float* k,
                  int64_t i0, int64_t i1, float* dst) {
  const int64_t S = s.seq;
  Sgemm(false, true, i1 - i0, i1, s.head_dim, ScaleOf(s), q + hv.q_off + i0 * hv.ld_q, hv.ld_q,
        k + hv.kv_off, hv.ld_kv, 0.0f, dst, S);
  vec::CausalSoftmaxRows(dst, S, i0 + 1, i1 - i0, S);  // row i over [0, i], zeros after
}

// Uninitialised scratch for one call; the kernels write before reading.
std::unique_ptr<float[]> Scratch(int64_t floats) {
  return std::make_unique_for_overwrite<float[]>(static_cast<size_t>(floats));
}

}  // namespace

void CpuBackend::AttentionForward(const AttentionShape& s, const float* q, const float* k,
                                  const float* v, float* out, float* probs) {
  const int64_t S = s.seq, pairs = s.batch * s.heads;
  ParallelFor(pairs, 1, [&](int64_t first, int64_t end) {
    std::unique_ptr<float[]> scratch;
    if (probs == nullptr) scratch = Scratch(std::min(S, kBlock) * S);
    for (int64_t pair = first; pair < end; ++pair) {
      const int64_t b = pair / s.heads, h = pair % s.heads;
      const HeadView hv = ViewOf(s, b, h);
      for (int64_t i0 = 0; i0 < S; i0 += kBlock) {
        const int64_t i1 = std::min(S, i0 + kBlock);
        float* p = probs ? probs + ((b * s.heads + h) * S + i0) * S : scratch.get();
        SoftmaxBlock(s, hv, q, k, i0, i1, p);
        Sgemm(false, false, i1 - i0, s.head_dim, i1, 1.0f, p, S, v + hv.kv_off, hv.ld_kv, 0.0f,
              out + hv.q_off + i0 * hv.ld_q, hv.ld_q);
      }
    }
  });
}

// Per block of query rows [i0, i1): the block's P (saved or recomputed) and dS = P (dP - rowsum)
// scale with dP = dO V^T give dQ[i0:i1] = dS K[0:i1]; keys and values [0, i1) accumulate
// dK += dS^T Q[i0:i1] and dV += P^T dO[i0:i1]. Scratch is two blocks of rows, never S x S.
void CpuBackend::AttentionBackward(const AttentionShape& s, const float* q, const float* k,
                                   const float* v, const float* probs, const float* dout, float* dq,
                                   float* dk, float* dv) {
  const int64_t S = s.seq, D = s.head_dim, rows = std::min(S, kBlock);
  const int64_t kv_floats = S * s.batch * s.kv_heads * D;
  std::fill(dk, dk + kv_floats, 0.0f);
  std::fill(dv, dv + kv_floats, 0.0f);
  const float scale = ScaleOf(s);
  const int64_t group = s.heads / s.kv_heads, groups = s.batch * s.kv_heads;
  ParallelFor(groups, 1, [&](int64_t first, int64_t end) {
    std::unique_ptr<float[]> scratch = Scratch(rows * S * (probs ? 1 : 2));
    float* ds = scratch.get();
    float* recomputed = probs ? nullptr : scratch.get() + rows * S;
    for (int64_t g = first; g < end; ++g) {
      const int64_t b = g / s.kv_heads, kvh = g % s.kv_heads;
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const HeadView hv = ViewOf(s, b, h);
        const float* do_h = dout + hv.q_off;
        for (int64_t i0 = 0; i0 < S; i0 += kBlock) {
          const int64_t i1 = std::min(S, i0 + kBlock), m = i1 - i0;
          const float* p = probs ? probs + ((b * s.heads + h) * S + i0) * S : recomputed;
          if (!probs) SoftmaxBlock(s, hv, q, k, i0, i1, recomputed);
          Sgemm(false, true, m, i1, D, 1.0f, do_h + i0 * hv.ld_q, hv.ld_q, v + hv.kv_off, hv.ld_kv,
                0.0f, ds, S);
          // row i over [0, i], zeros to i1
          vec::CausalSoftmaxGradRows(p, ds, S, i0 + 1, m, i1, scale);
          Sgemm(false, false, m, D, i1, 1.0f, ds, S, k + hv.kv_off, hv.ld_kv, 0.0f,
                dq + hv.q_off + i0 * hv.ld_q, hv.ld_q);
          Sgemm(true, false, i1, D, m, 1.0f, ds, S, q + hv.q_off + i0 * hv.ld_q, hv.ld_q, 1.0f,
                dk + hv.kv_off, hv.ld_kv);
          Sgemm(true, false, i1, D, m, 1.0f, p, S, do_h + i0 * hv.ld_q, hv.ld_q, 1.0f,
                dv + hv.kv_off, hv.ld_kv);
        }
      }
    }
  });
}

}  // namespace parallax::executor
