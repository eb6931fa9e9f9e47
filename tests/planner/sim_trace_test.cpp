// The simulator's predicted trace obeys the Chrome trace rules and the identity conventions the
// executor's measured trace uses.
#include <gtest/gtest.h>

#include "model/load.h"
#include "planner/sim/simulator.h"
#include "traces/trace.h"

namespace parallax::planner {
namespace {

Plan MakePlan(const char* model, const char* cluster, int64_t nodes, const char* layout) {
  Plan p;
  p.model = *ResolveModel(model);
  p.cluster = *ResolveCluster(cluster, nodes);
  p.layout = *ParseInlineLayout(layout);
  p.training.global_batch = p.layout.global_batch;
  return p;
}

class SimTrace : public ::testing::TestWithParam<const char*> {};

TEST_P(SimTrace, SlicesNestPerTrackAndEveryReceiveIsRecorded) {
  const Plan plan = MakePlan("gpt-1.3b", "dgx-a100", 2, GetParam());
  SimOptions so;
  so.record_trace = true;
  so.all_ranks = true;
  auto sim = Simulate(plan, nullptr, so);
  ASSERT_TRUE(sim) << sim.error().message;
  ASSERT_TRUE(sim->trace.has_value());
  const traces::Trace& t = *sim->trace;
  const auto nesting = traces::CheckNesting(t);
  EXPECT_FALSE(nesting.has_value()) << *nesting;
  // One receive per pipeline op that needs a neighbour's data: per rank, per micro-batch and
  // chunk, a forward receive unless the model stage is the first, a backward one unless the last.
  const Layout& l = plan.layout;
  const int64_t stages = l.pp * l.virtual_stages;
  const int64_t m = l.num_microbatches();
  int64_t expected = 0;
  for (int64_t r = 0; r < l.pp; ++r) {
    for (int64_t c = 0; c < l.virtual_stages; ++c) {
      const int64_t st = c * l.pp + r;
      expected += m * ((st > 0 ? 1 : 0) + (st < stages - 1 ? 1 : 0));
    }
  }
  expected *= l.dp * l.tp;
  int64_t recvs = 0;
  for (size_t i = 0; i < t.slices().size(); ++i) {
    const auto id = t.identity(t.slice(i));
    if (id && id->op == OpKind::kPpRecv) {
      ++recvs;
      EXPECT_TRUE(id->phase == Phase::kFwd || id->phase == Phase::kBwd);
    }
  }
  EXPECT_EQ(recvs, expected);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SimTrace,
                         ::testing::Values("dp=2,tp=2,pp=4,micro_batch=1,global_batch=16",
                                           "dp=1,tp=2,pp=8,micro_batch=1,global_batch=16,schedule=gpipe",
                                           "dp=2,tp=1,pp=8,micro_batch=1,global_batch=16,schedule=interleaved,"
                                           "virtual_stages=3"));

}  // namespace
}  // namespace parallax::planner
