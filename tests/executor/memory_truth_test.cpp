// Memory truth: the planner's memory model is an upper bound on the CPU backend's measured
// per-rank peak, at most 15% above it, on gpt-tiny and on a 6-layer 256-hidden model, in fp32,
// bf16 and fp16 (16-bit weights and activations, fp32 main weights, gradients and Adam state).
// Single-process layouts here; multi-rank layouts in layouts_mpi_test.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <tuple>

#include "executor/cpu/local_communicator.h"
#include "planner/memory/memory_model.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

struct Case {
  const char* layout;
  bool wide;
};

// Readable ctest names (gtest_discover_tests names each case by its printed value).
void PrintTo(const Case& c, std::ostream* os) { *os << (c.wide ? "6x256 " : "tiny ") << c.layout; }
struct PrecisionName {
  Precision p;
};
void PrintTo(const PrecisionName& p, std::ostream* os) { *os << ToString(p.p); }

class MemoryTruth : public ::testing::TestWithParam<std::tuple<Case, PrecisionName>> {};

TEST_P(MemoryTruth, PlannerIsAnUpperBoundWithinFifteenPercent) {
  const auto [c, named] = GetParam();
  const Precision precision = named.p;
  Plan plan = c.wide ? testing::WidePlan(c.layout, 8) : testing::TinyPlan(c.layout, 8);
  plan.training.precision = precision;
  auto world = LocalCommunicator();
  auto r = testing::Train(plan, *world, 2);
  ASSERT_TRUE(r) << r.error().message;
  const int64_t predicted = planner::PeakMemoryBytes(plan);
  const double ratio = static_cast<double>(predicted) / static_cast<double>(r->peak_bytes);
  std::printf("memory %-10s %-36s %-4s measured %10lld planner %10lld planner/measured %.3f\n", plan.model.name.c_str(),
              c.layout, ToString(precision), static_cast<long long>(r->peak_bytes), static_cast<long long>(predicted),
              ratio);
  EXPECT_GE(ratio, 1.0) << plan.model.name << " " << c.layout << " " << ToString(precision)
                        << ": measured peak above the prediction";
  EXPECT_LE(ratio, 1.15) << plan.model.name << " " << c.layout << " " << ToString(precision)
                         << ": prediction more than 15% above the measured peak";
}

INSTANTIATE_TEST_SUITE_P(
    Executor, MemoryTruth,
    ::testing::Combine(::testing::Values(Case{"micro_batch=1", false}, Case{"micro_batch=8", false},
                                         Case{"micro_batch=4,recompute=full", false},
                                         Case{"micro_batch=2,recompute=selective", false},
                                         Case{"micro_batch=1", true}, Case{"micro_batch=4", true},
                                         Case{"micro_batch=4,recompute=full", true},
                                         Case{"micro_batch=2,recompute=selective", true}),
                       ::testing::Values(PrecisionName{Precision::kFp32}, PrecisionName{Precision::kBf16},
                                         PrecisionName{Precision::kFp16})));

}  // namespace
}  // namespace parallax::executor
