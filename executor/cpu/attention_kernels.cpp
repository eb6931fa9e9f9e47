// Causal softmax attention with grouped-query heads, forward and backward (Vaswani et al. 2017),
// computed per (sequence, head) in blocks of query rows through BLAS: scores = scale Q K^T and
// out = P V as GEMMs over the causal prefix of each block, the softmax rows with the SIMD loops of
// vector_kernels.cpp. Backward: dP = dO V^T, dS = P (dP - rowsum(P dP)) scale, dQ = dS K,
// dK += dS^T Q, dV += P^T dO, again over the causal blocks only.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "executor/cpu/cpu_backend.h"
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
  return {s.batch * q_row, s.batch * kv_row, b * q_row + h * s.head_dim, b * kv_row + kvh * s.head_dim};
}

float ScaleOf(const AttentionShape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

void Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

// Rows [i0, i1) of the causal softmax of one head into p ([S, S], row-major): row i holds
// softmax over columns [0, i] and zeros after.
void SoftmaxBlock(const AttentionShape& s, const HeadView& hv, const float* q, const float* k, int64_t i0,
                  int64_t i1, float* p) {
  const int64_t S = s.seq;
  Sgemm(false, true, i1 - i0, i1, s.head_dim, ScaleOf(s), q + hv.q_off + i0 * hv.ld_q, hv.ld_q, k + hv.kv_off,
        hv.ld_kv, 0.0f, p + i0 * S, S);
  for (int64_t i = i0; i < i1; ++i) {
    float* row = p + i * S;
    const int64_t len = i + 1;
    const float mx = vec::Max(row, len);
    const double sum = vec::ExpShiftSum(row, len, mx);
    vec::Scale(row, len, static_cast<float>(1.0 / sum));
    std::memset(row + len, 0, static_cast<size_t>(S - len) * sizeof(float));
  }
}

// Uninitialised scratch for one call (S*S floats per matrix); the kernels write before reading.
std::unique_ptr<float[]> Scratch(int64_t floats) {
  return std::make_unique_for_overwrite<float[]>(static_cast<size_t>(floats));
}

}  // namespace

void CpuBackend::AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* out,
                                  float* probs) {
  const int64_t S = s.seq;
  std::unique_ptr<float[]> scratch = probs ? nullptr : Scratch(S * S);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const HeadView hv = ViewOf(s, b, h);
      float* p = probs ? probs + (b * s.heads + h) * S * S : scratch.get();
      for (int64_t i0 = 0; i0 < S; i0 += kBlock) {
        const int64_t i1 = std::min(S, i0 + kBlock);
        SoftmaxBlock(s, hv, q, k, i0, i1, p);
        Sgemm(false, false, i1 - i0, s.head_dim, i1, 1.0f, p + i0 * S, S, v + hv.kv_off, hv.ld_kv, 0.0f,
              out + hv.q_off + i0 * hv.ld_q, hv.ld_q);
      }
    }
  }
}

void CpuBackend::AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                   const float* probs, const float* dout, float* dq, float* dk, float* dv) {
  const int64_t S = s.seq, D = s.head_dim;
  const int64_t kv_floats = S * s.batch * s.kv_heads * D;
  std::fill(dk, dk + kv_floats, 0.0f);
  std::fill(dv, dv + kv_floats, 0.0f);
  std::unique_ptr<float[]> scratch = Scratch(S * S * (probs ? 1 : 2));
  float* ds = scratch.get();
  float* recomputed = probs ? nullptr : scratch.get() + S * S;
  const float scale = ScaleOf(s);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const HeadView hv = ViewOf(s, b, h);
      const float* p = probs ? probs + (b * s.heads + h) * S * S : recomputed;
      const float* do_h = dout + hv.q_off;
      // Row blocks: dP = dO V^T over the causal prefix, then dS in place, then dQ = dS K.
      for (int64_t i0 = 0; i0 < S; i0 += kBlock) {
        const int64_t i1 = std::min(S, i0 + kBlock);
        if (!probs) SoftmaxBlock(s, hv, q, k, i0, i1, recomputed);
        Sgemm(false, true, i1 - i0, i1, D, 1.0f, do_h + i0 * hv.ld_q, hv.ld_q, v + hv.kv_off, hv.ld_kv, 0.0f,
              ds + i0 * S, S);
        for (int64_t i = i0; i < i1; ++i) {
          vec::SoftmaxGrad(p + i * S, ds + i * S, i + 1, scale);
          std::memset(ds + i * S + i + 1, 0, static_cast<size_t>(i1 - i - 1) * sizeof(float));
        }
        Sgemm(false, false, i1 - i0, D, i1, 1.0f, ds + i0 * S, S, k + hv.kv_off, hv.ld_kv, 0.0f,
              dq + hv.q_off + i0 * hv.ld_q, hv.ld_q);
      }
      // Column blocks: key j gets gradient from query rows i >= j only.
      for (int64_t j0 = 0; j0 < S; j0 += kBlock) {
        const int64_t j1 = std::min(S, j0 + kBlock);
        Sgemm(true, false, j1 - j0, D, S - j0, 1.0f, p + j0 * S + j0, S, do_h + j0 * hv.ld_q, hv.ld_q, 1.0f,
              dv + hv.kv_off + j0 * hv.ld_kv, hv.ld_kv);
        Sgemm(true, false, j1 - j0, D, S - j0, 1.0f, ds + j0 * S + j0, S, q + hv.q_off + j0 * hv.ld_q, hv.ld_q, 1.0f,
              dk + hv.kv_off + j0 * hv.ld_kv, hv.ld_kv);
      }
    }
  }
}

}  // namespace parallax::executor
