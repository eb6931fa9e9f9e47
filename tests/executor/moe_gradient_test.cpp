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

struct Probe {
  ParamGroup* group = nullptr;
  int64_t index = 0;  //!< flat element in the group
};

//! The step's loss (LM + auxiliary) with element `p` set to `value`.
double LossAt(Trainer& t, CpuBackend& be, const Probe& p, float value) {
  be.CopyToDevice(p.group->values().at(p.index), &value, DType::kF32, 1);
  auto loss = t.ComputeGradients();
  if (!loss) throw std::runtime_error(loss.error().message);
  return *loss + t.aux_loss();
}

//! The element of parameter `name` in `g` with the largest gradient.
Probe LargestGradient(CpuBackend& be, ParamGroup* g, const std::string& name) {
  for (const ParamSpec& s : g->params()) {
    if (s.name != name) continue;
    std::vector<float> grad(static_cast<size_t>(s.numel()));
    be.CopyToHost(grad.data(), DType::kF32, g->grads().at(s.offset), s.numel());
    int64_t best = 0;
    for (int64_t i = 1; i < s.numel(); ++i) {
      if (std::abs(grad[static_cast<size_t>(i)]) > std::abs(grad[static_cast<size_t>(best)])) best = i;
    }
    return {g, s.offset + best};
  }
  throw std::runtime_error("no parameter " + name);
}

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
    const Probe p = LargestGradient(be, g, name);
    float analytic = 0, w = 0;
    be.CopyToHost(&analytic, DType::kF32, g->grads().at(p.index), 1);
    be.CopyToHost(&w, DType::kF32, g->values().at(p.index), 1);
    const float eps = 2e-3f;
    const double numeric = (LossAt(**t, be, p, w + eps) - LossAt(**t, be, p, w - eps)) / (2.0 * eps);
    LossAt(**t, be, p, w);
    EXPECT_NEAR(numeric, analytic, 0.03 * std::abs(analytic) + 1e-5) << name;
    EXPECT_GT(std::abs(analytic), 1e-5) << name << ": too small to check";
  }
}

}  // namespace
}  // namespace parallax::executor
