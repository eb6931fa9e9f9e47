// Causal softmax attention with grouped-query heads, forward and backward (Vaswani et al. 2017).
#include <algorithm>
#include <cmath>
#include <vector>

#include "executor/cpu/cpu_backend.h"

namespace parallax::executor {
namespace {

struct Strides {
  int64_t q_row, kv_row, group;
  float scale;
};

Strides StridesOf(const AttentionShape& s) {
  return {s.heads * s.head_dim, s.kv_heads * s.head_dim, s.heads / s.kv_heads,
          1.0f / std::sqrt(static_cast<float>(s.head_dim))};
}

// Softmax of row i (positions 0..i) of head (b, h) into p.
void SoftmaxRow(const AttentionShape& s, const Strides& st, const float* q, const float* k, int64_t b, int64_t h,
                int64_t i, float* p) {
  const int64_t d = s.head_dim;
  const float* qi = q + (i * s.batch + b) * st.q_row + h * d;
  const int64_t kvh = h / st.group;
  float mx = -INFINITY;
  for (int64_t j = 0; j <= i; ++j) {
    const float* kj = k + (j * s.batch + b) * st.kv_row + kvh * d;
    float dot = 0;
    for (int64_t e = 0; e < d; ++e) dot += qi[e] * kj[e];
    p[j] = dot * st.scale;
    mx = std::max(mx, p[j]);
  }
  float sum = 0;
  for (int64_t j = 0; j <= i; ++j) {
    p[j] = std::exp(p[j] - mx);
    sum += p[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
  for (int64_t j = i + 1; j < s.seq; ++j) p[j] = 0;
}

}  // namespace

void CpuBackend::AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* out,
                                  float* probs) {
  const Strides st = StridesOf(s);
  const int64_t d = s.head_dim;
  std::vector<float> row(static_cast<size_t>(s.seq));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / st.group;
      for (int64_t i = 0; i < s.seq; ++i) {
        float* p = probs ? probs + ((b * s.heads + h) * s.seq + i) * s.seq : row.data();
        SoftmaxRow(s, st, q, k, b, h, i, p);
        float* oi = out + (i * s.batch + b) * st.q_row + h * d;
        std::fill(oi, oi + d, 0.0f);
        for (int64_t j = 0; j <= i; ++j) {
          const float* vj = v + (j * s.batch + b) * st.kv_row + kvh * d;
          for (int64_t e = 0; e < d; ++e) oi[e] += p[j] * vj[e];
        }
      }
    }
  }
}

void CpuBackend::AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                   const float* probs, const float* dout, float* dq, float* dk, float* dv) {
  const Strides st = StridesOf(s);
  const int64_t d = s.head_dim;
  const int64_t rows = s.seq * s.batch;
  std::fill(dk, dk + rows * st.kv_row, 0.0f);
  std::fill(dv, dv + rows * st.kv_row, 0.0f);
  std::vector<float> row(static_cast<size_t>(s.seq)), dp(static_cast<size_t>(s.seq));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / st.group;
      for (int64_t i = 0; i < s.seq; ++i) {
        const float* p = probs ? probs + ((b * s.heads + h) * s.seq + i) * s.seq : row.data();
        if (!probs) SoftmaxRow(s, st, q, k, b, h, i, row.data());
        const float* doi = dout + (i * s.batch + b) * st.q_row + h * d;
        const float* qi = q + (i * s.batch + b) * st.q_row + h * d;
        float dot_pdp = 0;
        for (int64_t j = 0; j <= i; ++j) {
          const float* vj = v + (j * s.batch + b) * st.kv_row + kvh * d;
          float acc = 0;
          for (int64_t e = 0; e < d; ++e) acc += doi[e] * vj[e];
          dp[static_cast<size_t>(j)] = acc;
          dot_pdp += p[j] * acc;
          float* dvj = dv + (j * s.batch + b) * st.kv_row + kvh * d;
          for (int64_t e = 0; e < d; ++e) dvj[e] += p[j] * doi[e];
        }
        float* dqi = dq + (i * s.batch + b) * st.q_row + h * d;
        std::fill(dqi, dqi + d, 0.0f);
        for (int64_t j = 0; j <= i; ++j) {
          const float ds = p[j] * (dp[static_cast<size_t>(j)] - dot_pdp) * st.scale;
          const float* kj = k + (j * s.batch + b) * st.kv_row + kvh * d;
          float* dkj = dk + (j * s.batch + b) * st.kv_row + kvh * d;
          for (int64_t e = 0; e < d; ++e) {
            dqi[e] += ds * kj[e];
            dkj[e] += ds * qi[e];
          }
        }
      }
    }
  }
}

}  // namespace parallax::executor
