// Memory truth (issue 5 item 7): the CPU backend's measured per-rank peak equals the planner's
// memory model for the same plan within 15%, on gpt-tiny and on a 6-layer 256-hidden model.
// Single-process layouts here; multi-rank layouts in layouts_mpi_test.cpp.
#include <gtest/gtest.h>

#include "executor/cpu/local_communicator.h"
#include "planner/memory/memory_model.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

struct Case {
  const char* layout;
  bool wide;
};

class MemoryTruth : public ::testing::TestWithParam<Case> {};

TEST_P(MemoryTruth, MeasuredPeakWithinFifteenPercentOfThePlannerModel) {
  const Case c = GetParam();
  const Plan plan = c.wide ? testing::WidePlan(c.layout, 8) : testing::TinyPlan(c.layout, 8);
  auto world = LocalCommunicator();
  auto r = testing::Train(plan, *world, 2);
  ASSERT_TRUE(r) << r.error().message;
  const int64_t predicted = planner::PeakMemoryBytes(plan);
  const double ratio = static_cast<double>(r->peak_bytes) / static_cast<double>(predicted);
  EXPECT_NEAR(ratio, 1.0, 0.15) << plan.model.name << " " << c.layout << ": measured " << r->peak_bytes
                                << " B, planner " << predicted << " B";
}

INSTANTIATE_TEST_SUITE_P(Executor, MemoryTruth,
                         ::testing::Values(Case{"micro_batch=1", false}, Case{"micro_batch=8", false},
                                           Case{"micro_batch=4,recompute=full", false},
                                           Case{"micro_batch=2,recompute=selective", false},
                                           Case{"micro_batch=1", true}, Case{"micro_batch=4", true},
                                           Case{"micro_batch=4,recompute=full", true},
                                           Case{"micro_batch=2,recompute=selective", true}));

}  // namespace
}  // namespace parallax::executor
