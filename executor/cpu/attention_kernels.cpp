// Softmax attention with grouped-query heads, forward and backward (Vaswani et al. 2017), keeping the
// row log-sum-exp instead of the probabilities (Dao 2023, FlashAttention-2, algorithms 1 and 2), per
// (sequence, head) in blocks of query rows through BLAS: scores = scale Q K^T and out = P V as GEMMs
// over the keys the block sees, the softmax rows with the SIMD loops of vector_kernels.cpp, which
// also give lse. Backward: P = exp(scale Q K^T - lse) again, delta = rowsum(dO O), dP = dO V^T,
// dS = P (dP - delta) scale, dQ = dS K, dK += dS^T Q, dV += P^T dO, over the visible keys only.
// Scratch: blocks of rows, O(64 keys). With several intra-op threads (kernel_threads.h) the
// (sequence, head) pairs are spread over them, BLAS single-threaded inside; backward spreads
// (sequence, kv head) groups so that each dK/dV slice is accumulated by one thread over its query
// heads in order: results equal the serial loop's.
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

// Query rows per block: a block's GEMMs cover the keys its last row sees, so a smaller block wastes
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

void Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

// Query rows [i0, i1) of one (sequence, head): the score rows (leading dimension keys()) over keys
// [k0, k0 + cols), from the first key the block's first row sees to the last its last row sees,
// and where the head's lse of row i0 lies. Column c of a score row is key k0 + c.
struct Block {
  int64_t i0, i1, k0, cols;
  vec::ScoreRows rows;
  int64_t lse_off, lse_stride;
};

// The block of rows from i0: kBlock rows, fewer at the end, and never across a chunk's boundary
// (a chunked window's rows of one block then share their first key).
int64_t BlockEnd(const AttentionShape& s, int64_t i0) {
  int64_t i1 = std::min(s.seq, i0 + kBlock);
  if (s.causal && s.window > 0 && s.chunked) {
    const int64_t p = s.query_start + i0;
    i1 = std::min(i1, i0 + (p / s.window + 1) * s.window - p);
  }
  return i1;
}

Block BlockOf(const AttentionShape& s, int64_t b, int64_t h, int64_t i0) {
  const int64_t i1 = BlockEnd(s, i0), keys = s.keys();
  const int64_t k0 = std::min(s.FirstVisibleKey(i0), s.VisibleKeys(i1 - 1));
  const int64_t cols = s.VisibleKeys(i1 - 1) - k0;
  const int64_t first = s.causal ? i0 + s.causal_offset + 1 : keys;
  const bool sliding = s.causal && s.window > 0 && !s.chunked;
  const int64_t lse_stride = s.batch * s.heads;
  const vec::ScoreRows rows{.ld = keys, .first_len = first - k0, .cap = keys - k0, .count = i1 - i0, .zero_to = cols,
                            .start_base = sliding ? i0 + s.causal_offset - s.window + 1 - k0 : 0,
                            .start_step = sliding ? 1 : 0};
  return {i0, i1, k0, cols, rows, i0 * lse_stride + b * s.heads + h, lse_stride};
}

// scale Q[i0:i1] K[k0:k0+cols]^T into dst (row r of dst is query row i0 + r).
void Scores(const AttentionShape& s, const HeadView& hv, const Block& blk, const float* q, const float* k,
            float* dst) {
  Sgemm(false, true, blk.i1 - blk.i0, blk.cols, s.head_dim, ScaleOf(s), q + hv.q_off + blk.i0 * hv.ld_q, hv.ld_q,
        k + hv.kv_off + blk.k0 * hv.ld_kv, hv.ld_kv, 0.0f, dst, s.keys());
}

// Uninitialised scratch for one call; the kernels write before reading.
std::unique_ptr<float[]> Scratch(int64_t floats) {
  return std::make_unique_for_overwrite<float[]>(static_cast<size_t>(floats));
}

}  // namespace

void CpuBackend::AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                  float* out, float* lse) {
  const int64_t pairs = s.batch * s.heads;
  ParallelFor(pairs, 1, [&](int64_t first, int64_t end) {
    std::unique_ptr<float[]> p = Scratch(std::min(s.seq, kBlock) * s.keys());
    float unkept[kBlock];  // the block's statistics when the caller keeps none
    for (int64_t pair = first; pair < end; ++pair) {
      const int64_t b = pair / s.heads, h = pair % s.heads;
      const HeadView hv = ViewOf(s, b, h);
      for (int64_t i0 = 0; i0 < s.seq; i0 = BlockEnd(s, i0)) {
        const Block blk = BlockOf(s, b, h, i0);
        float* out_blk = out + hv.q_off + i0 * hv.ld_q;
        float* lse_blk = lse ? lse + blk.lse_off : unkept;
        const int64_t lse_stride = lse ? blk.lse_stride : 1;
        if (blk.cols == 0) {  // no row of the block sees a key
          for (int64_t r = 0; r < blk.i1 - i0; ++r) {
            std::fill_n(out_blk + r * hv.ld_q, s.head_dim, 0.0f);
            lse_blk[r * lse_stride] = -INFINITY;
          }
          continue;
        }
        Scores(s, hv, blk, q, k, p.get());
        vec::SoftmaxRowsLse(p.get(), blk.rows, lse_blk, lse_stride);
        Sgemm(false, false, blk.i1 - i0, s.head_dim, blk.cols, 1.0f, p.get(), s.keys(),
              v + hv.kv_off + blk.k0 * hv.ld_kv, hv.ld_kv, 0.0f, out_blk, hv.ld_q);
      }
    }
  });
}

// Per block of query rows [i0, i1): P = exp(scores - lse) and dS = P (dP - delta) scale with
// dP = dO V^T give dQ[i0:i1] = dS K[0:cols]; the visible keys and values accumulate
// dK += dS^T Q[i0:i1] and dV += P^T dO[i0:i1]. Scratch is two blocks of rows, never seq x keys.
void CpuBackend::AttentionBackward(const AttentionShape& s, const AttentionGradOperands& g) {
  const int64_t D = s.head_dim, rows = std::min(s.seq, kBlock), keys = s.keys();
  std::fill_n(g.dk, s.kv_elements(), 0.0f);
  std::fill_n(g.dv, s.kv_elements(), 0.0f);
  const float scale = ScaleOf(s);
  const int64_t group = s.heads / s.kv_heads, groups = s.batch * s.kv_heads;
  ParallelFor(groups, 1, [&](int64_t first, int64_t end) {
    std::unique_ptr<float[]> scratch = Scratch(rows * keys * 2 + rows);
    float* p = scratch.get();
    float* ds = p + rows * keys;
    float* delta = ds + rows * keys;
    for (int64_t gi = first; gi < end; ++gi) {
      const int64_t b = gi / s.kv_heads, kvh = gi % s.kv_heads;
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const HeadView hv = ViewOf(s, b, h);
        for (int64_t i0 = 0; i0 < s.seq; i0 = BlockEnd(s, i0)) {
          const Block blk = BlockOf(s, b, h, i0);
          const int64_t m = blk.i1 - i0, q_blk = hv.q_off + i0 * hv.ld_q, kv_blk = hv.kv_off + blk.k0 * hv.ld_kv;
          if (blk.cols == 0) {
            for (int64_t r = 0; r < m; ++r) std::fill_n(g.dq + q_blk + r * hv.ld_q, D, 0.0f);
            continue;
          }
          for (int64_t r = 0; r < m; ++r) {
            const int64_t off = q_blk + r * hv.ld_q;
            delta[r] = static_cast<float>(vec::Dot(g.dout + off, g.out + off, D));
          }
          Scores(s, hv, blk, g.q, g.k, p);
          vec::ExpMinusLseRows(p, blk.rows, g.lse + blk.lse_off, blk.lse_stride);
          Sgemm(false, true, m, blk.cols, D, 1.0f, g.dout + q_blk, hv.ld_q, g.v + kv_blk, hv.ld_kv, 0.0f, ds, keys);
          vec::SoftmaxGradDeltaRows(p, ds, blk.rows, delta, scale);
          Sgemm(false, false, m, D, blk.cols, 1.0f, ds, keys, g.k + kv_blk, hv.ld_kv, 0.0f, g.dq + q_blk, hv.ld_q);
          Sgemm(true, false, blk.cols, D, m, 1.0f, ds, keys, g.q + q_blk, hv.ld_q, 1.0f, g.dk + kv_blk, hv.ld_kv);
          Sgemm(true, false, blk.cols, D, m, 1.0f, p, keys, g.dout + q_blk, hv.ld_q, 1.0f, g.dv + kv_blk, hv.ld_kv);
        }
      }
    }
  });
}

}  // namespace parallax::executor
