// The MoE layer's backward against central differences of the step's loss (LM + auxiliary), on one
// process in fp32: the layout suite compares layouts with the single-process run, which a backward
// wrong in every layout alike would pass. Checked in the last layer (a change of its routing
// cannot ripple into later routers): the largest-gradient element of an expert's fc1 and fc2 and of
// the router.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

using testing::CheckedGradient;
using testing::LargestGradient;

TEST(MoeGradient, ExpertAndRouterGradientsMatchCentralDifferencesOfTheLoss) {
  const Plan plan = testing::MoePlan("micro_batch=2", 4);
  CpuBackend be;
  auto local = LocalCommunicator();
  auto t = Trainer::Create(plan, be, *local, {});
  ASSERT_TRUE(t) << t.error().message;
  ParamGroup *layer = nullptr, *experts = nullptr;
  for (ParamGroup* g : (*t)->model().groups()) {
    if (g->name() == "layer3") layer = g;
    if (g->name() == "layer3_experts") experts = g;
  }
  ASSERT_NE(layer, nullptr);
  ASSERT_NE(experts, nullptr);
  ASSERT_TRUE((*t)->ComputeGradients());
  for (const auto& [g, name] : {std::pair{experts, "layer3.expert1.fc1_up"}, std::pair{experts, "layer3.expert2.fc2"},
                                std::pair{layer, "layer3.router"}}) {
    ASSERT_TRUE((*t)->ComputeGradients());
    const auto [numeric, analytic] = CheckedGradient(**t, be, LargestGradient(be, g, name));
    EXPECT_NEAR(numeric, analytic, 0.03 * std::abs(analytic) + 1e-5) << name;
    EXPECT_GT(std::abs(analytic), 1e-5) << name << ": too small to check";
  }
}

}  // namespace
}  // namespace parallax::executor
