// Multi-head latent attention's backward (executor/runtime/mla_attention.cpp) against central
// differences of the step's loss, on one process in fp32: every MLA parameter of the last layer
// (the largest-gradient element of each and the derivative along a random direction over all its
// elements, after six steps), with and without the query latent. The layout suite
// (layouts_mpi_test.cpp, mla_* cases) then holds every layout to this single-process run.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

using testing::CheckedGradient;
using testing::LargestGradient;

void ExpectGradientsMatch(bool query_latent) {
  Plan plan = testing::MlaPlan("micro_batch=2", 4, query_latent);
  plan.training.lr = 2e-2;
  CpuBackend be;
  auto local = LocalCommunicator();
  auto t = Trainer::Create(plan, be, *local, {});
  ASSERT_TRUE(t) << t.error().message;
  ParamGroup* layer = nullptr;
  for (ParamGroup* g : (*t)->model().groups()) {
    if (g->name() == "layer3") layer = g;
  }
  ASSERT_NE(layer, nullptr);
  // Steps at a large learning rate first: at initialisation the attention is nearly uniform and the
  // query latent norm's gradient below what a difference of fp32 losses resolves.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE((*t)->Step());
  std::vector<std::string> names{"q_nope", "q_rope", "kv_down", "kv_norm", "k_rope", "k_up", "v_up", "wo"};
  if (query_latent) names.insert(names.begin(), {"q_down", "q_norm"});
  for (const std::string& name : names) {
    ASSERT_TRUE((*t)->ComputeGradients());
    const auto [numeric, analytic] = CheckedGradient(**t, be, LargestGradient(be, layer, "layer3." + name));
    EXPECT_NEAR(numeric, analytic, 0.03 * std::abs(analytic) + 1e-5) << name;
    EXPECT_GT(std::abs(analytic), 1e-5) << name << ": too small to check";
    ASSERT_TRUE((*t)->ComputeGradients());
    const auto [along, expected] = testing::DirectionalGradient(**t, be, layer, "layer3." + name);
    std::printf("%-8s largest element %+.4e (central difference %+.4e), along a random direction %+.4e (%+.4e)\n",
                name.c_str(), analytic, numeric, expected, along);
    EXPECT_NEAR(along, expected, 0.03 * std::abs(expected) + 1e-5) << name << " along a random direction";
  }
}

TEST(MlaGradient, EveryProjectionAndNormMatchesCentralDifferencesWithTheQueryLatent) { ExpectGradientsMatch(true); }

TEST(MlaGradient, EveryProjectionAndNormMatchesCentralDifferencesWithoutTheQueryLatent) {
  ExpectGradientsMatch(false);
}

TEST(MlaGradient, MlaModelsTheExecutorCannotRunAreRefusedByName) {
  Plan biased = testing::MlaPlan("micro_batch=2", 4);
  biased.model.bias = true;
  Status st = ValidateForExecution(biased, 1);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("multi-head latent attention without biases"), std::string::npos)
      << st.error().message;
  Plan wide = testing::MlaPlan("micro_batch=2", 4);
  wide.model.v_head_dim = 32;  // wider than 16 + 8
  st = ValidateForExecution(wide, 1);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("v_head_dim <= qk_nope_head_dim + qk_rope_head_dim"), std::string::npos)
      << st.error().message;
}

}  // namespace
}  // namespace parallax::executor
