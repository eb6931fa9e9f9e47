// The MoE router (executor/runtime/moe_router.h) on hand-computed cases: Megatron-Core's default
// order (top-k of the logits, then a softmax over those k), the Switch auxiliary loss over every
// expert's softmax score, and their gradients against central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "executor/runtime/moe_router.h"

namespace parallax::executor {
namespace {

// Two tokens, three experts, top-2.
const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f,   // token 0: experts 1, 2
                                    0.5f, -1.0f, 0.5f};  // token 1: a tie, the lower index first: 0, 2

TEST(MoeRouter, PicksTheLargestLogitsAndWeightsThemBySoftmaxOverTheChosen) {
  const Routing r = RouteTopK(kLogits, 2, 3, 2);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{1, 2, 0, 2}));
  // softmax(3, 2) = (e / (e + 1), 1 / (e + 1)); softmax(0.5, 0.5) = (1/2, 1/2).
  const double e = std::exp(1.0);
  EXPECT_NEAR(r.prob[0], e / (e + 1), 1e-6);
  EXPECT_NEAR(r.prob[1], 1 / (e + 1), 1e-6);
  EXPECT_NEAR(r.prob[2], 0.5, 1e-6);
  EXPECT_NEAR(r.prob[3], 0.5, 1e-6);
  EXPECT_EQ(r.counts, (std::vector<double>{1, 1, 2}));
  // The scores are the softmax over all three experts.
  const double z0 = std::exp(1.0) + std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(r.scores[1], std::exp(3.0) / z0, 1e-6);
}

TEST(MoeRouter, AuxLossIsTheSwitchLossOverTheGroupsCounts) {
  const Routing r = RouteTopK(kLogits, 2, 3, 2);
  // Over a group of 4 tokens (this rank's 2 and another's) with counts (3, 1, 4):
  // coeff * E / (T^2 k) * sum_e (sum_t score_te) count_e.
  const std::vector<double> counts = {3, 1, 4};
  double dot = 0;
  for (int e = 0; e < 3; ++e) dot += (r.scores[e] + r.scores[3 + e]) * counts[e];
  EXPECT_NEAR(AuxLossShare(r, counts, 4, 1e-2), 1e-2 * 3.0 / (16.0 * 2.0) * dot, 1e-9);
  // Perfect balance: every score 1/E and every count T k / E gives the coefficient itself.
  Routing even = RouteTopK(std::vector<float>(8, 0.0f), 2, 4, 2);
  EXPECT_NEAR(AuxLossShare(even, {1, 1, 1, 1}, 2, 1e-2), 1e-2, 1e-9);
}

// loss(logits) = sum_ts w_ts prob_ts + a * aux: its gradient against central differences (the
// routing does not change under the small steps).
TEST(MoeRouter, LogitGradientMatchesCentralDifferences) {
  const std::vector<float> w = {0.3f, -1.2f, 0.7f, 2.0f};
  const std::vector<double> counts = {3, 1, 4};
  const double a = 5.0;
  auto loss = [&](const std::vector<float>& z) {
    const Routing r = RouteTopK(z, 2, 3, 2);
    double l = 0;
    for (size_t i = 0; i < w.size(); ++i) l += w[i] * r.prob[i];
    return l + a * AuxLossShare(r, counts, 4, 1e-2);
  };
  std::vector<float> z = {1.0f, 3.0f, 2.0f, 0.5f, -1.0f, 0.6f};  // no tie: a step keeps the choice
  const Routing rz = RouteTopK(z, 2, 3, 2);
  const std::vector<float> gz = RouterLogitGrad(rz, w, counts, 4, 1e-2, a);
  for (size_t i = 0; i < z.size(); ++i) {
    std::vector<float> up = z, down = z;
    up[i] += 1e-3f;
    down[i] -= 1e-3f;
    EXPECT_NEAR(gz[i], (loss(up) - loss(down)) / 2e-3, 2e-3) << "logit " << i;
  }
}

}  // namespace
}  // namespace parallax::executor
