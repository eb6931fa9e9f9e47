#include "executor/runtime/moe_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace parallax::executor {
namespace {

//! out[i] = softmax(in)[i] over n values.
void Softmax(const float* in, int64_t n, float* out) {
  const float top = *std::max_element(in, in + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(in[i] - top));
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::exp(static_cast<double>(in[i] - top)) / sum);
}

//! dx = p * (dy - sum_j p_j dy_j), a softmax's backward over n values (accumulated into dx).
void SoftmaxBackwardAdd(const float* p, const double* dy, int64_t n, float* dx) {
  double dot = 0;
  for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(p[i]) * dy[i];
  for (int64_t i = 0; i < n; ++i) dx[i] += static_cast<float>(static_cast<double>(p[i]) * (dy[i] - dot));
}

double AuxFactor(const Routing& r, int64_t group_tokens, double coeff) {
  const double t = static_cast<double>(group_tokens);
  return coeff * static_cast<double>(r.experts) / (t * t * static_cast<double>(r.topk));
}

}  // namespace

Routing RouteTopK(const std::vector<float>& logits, int64_t tokens, int64_t experts, int64_t topk) {
  Routing r;
  r.tokens = tokens;
  r.experts = experts;
  r.topk = topk;
  r.expert.resize(static_cast<size_t>(tokens * topk));
  r.prob.resize(static_cast<size_t>(tokens * topk));
  r.scores.resize(static_cast<size_t>(tokens * experts));
  r.counts.assign(static_cast<size_t>(experts), 0.0);
  std::vector<int32_t> order(static_cast<size_t>(experts));
  std::vector<float> chosen(static_cast<size_t>(topk));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* z = logits.data() + t * experts;
    Softmax(z, experts, r.scores.data() + t * experts);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + topk, order.end(),
                      [&](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    for (int64_t s = 0; s < topk; ++s) {
      r.expert[static_cast<size_t>(t * topk + s)] = order[static_cast<size_t>(s)];
      chosen[static_cast<size_t>(s)] = z[order[static_cast<size_t>(s)]];
      r.counts[static_cast<size_t>(order[static_cast<size_t>(s)])] += 1;
    }
    Softmax(chosen.data(), topk, r.prob.data() + t * topk);
  }
  return r;
}

double AuxLossShare(const Routing& r, const std::vector<double>& group_counts, int64_t group_tokens, double coeff) {
  double sum = 0;
  for (int64_t t = 0; t < r.tokens; ++t) {
    for (int64_t e = 0; e < r.experts; ++e) {
      sum += static_cast<double>(r.scores[static_cast<size_t>(t * r.experts + e)]) * group_counts[static_cast<size_t>(e)];
    }
  }
  return sum * AuxFactor(r, group_tokens, coeff);
}

std::vector<float> RouterLogitGrad(const Routing& r, const std::vector<float>& dprob,
                                   const std::vector<double>& group_counts, int64_t group_tokens, double coeff,
                                   double aux_weight) {
  const int64_t E = r.experts, k = r.topk;
  std::vector<float> dlogits(static_cast<size_t>(r.tokens * E), 0.0f);
  std::vector<double> daux(static_cast<size_t>(E));
  const double factor = aux_weight * AuxFactor(r, group_tokens, coeff);
  for (int64_t e = 0; e < E; ++e) daux[static_cast<size_t>(e)] = factor * group_counts[static_cast<size_t>(e)];
  std::vector<double> dp(static_cast<size_t>(k));
  std::vector<float> dchosen(static_cast<size_t>(k));
  for (int64_t t = 0; t < r.tokens; ++t) {
    float* dz = dlogits.data() + t * E;
    SoftmaxBackwardAdd(r.scores.data() + t * E, daux.data(), E, dz);
    for (int64_t s = 0; s < k; ++s) dp[static_cast<size_t>(s)] = dprob[static_cast<size_t>(t * k + s)];
    std::fill(dchosen.begin(), dchosen.end(), 0.0f);
    SoftmaxBackwardAdd(r.prob.data() + t * k, dp.data(), k, dchosen.data());
    for (int64_t s = 0; s < k; ++s) dz[r.expert[static_cast<size_t>(t * k + s)]] += dchosen[static_cast<size_t>(s)];
  }
  return dlogits;
}

}  // namespace parallax::executor
