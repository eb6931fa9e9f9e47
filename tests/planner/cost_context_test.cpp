// CostContext: the unit-cost cache serves a model's costs only to the same model.
#include <gtest/gtest.h>

#include <vector>

#include "model/presets.h"
#include "planner/cost/plan_costs.h"

namespace parallax::planner {
namespace {

//! Every op time of a unit list, in order: two models whose ops differ anywhere differ here.
std::vector<double> Times(const UnitCosts& u) {
  std::vector<double> out;
  for (const UnitOps* unit : {&u.layer, &u.embedding, &u.head}) {
    for (const auto* ops : {&unit->fwd, &unit->bwd}) {
      for (const CostedOp& o : *ops) out.push_back(o.time_s);
    }
  }
  return out;
}

TEST(CostContext, AModelDifferingOnlyInBiasOrPositionIsNotServedTheCachedCosts) {
  const ClusterSpec cluster = *ClusterPreset("dgx-a100");
  const ModelSpec gpt = *ModelPreset("gpt-1.3b");  // biases, learned positions
  ModelSpec no_bias = gpt;
  no_bias.bias = false;
  ModelSpec rotary = gpt;
  rotary.position = PositionKind::kRotary;
  Layout l;
  l.tp = 2;
  l.micro_batch = 2;
  for (const ModelSpec& other : {no_bias, rotary}) {
    CostContext reused(cluster, Precision::kBf16), fresh(cluster, Precision::kBf16);
    const std::vector<double> first = Times(reused.Units(gpt, l, gpt.seq_len));
    const std::vector<double> want = Times(fresh.Units(other, l, other.seq_len));
    ASSERT_NE(first, want);  // the op catalogue reads the field: the costs must differ
    EXPECT_EQ(Times(reused.Units(other, l, other.seq_len)), want);
  }
}

}  // namespace
}  // namespace parallax::planner
