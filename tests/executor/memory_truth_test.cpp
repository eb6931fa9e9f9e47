// Memory truth: the planner's memory model is an upper bound on the CPU backend's measured
// per-rank peak, at most 15% above it, on gpt-tiny, on a 6-layer 256-hidden model and on a model of
// GPT-1.3B's proportions (dropout asked for, which our executor does not apply; heads x seq / hidden
// = 16, vocab = 25 hidden: attention probabilities and logits dominate), in fp32, bf16 and fp16
// (16-bit weights and activations, fp32 main weights, gradients and Adam state).
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

enum class Shape { kTiny, kWide, kLongSeq };

struct Case {
  const char* layout;
  Shape shape;
};

//! GPT-1.3B's proportions (gpt-1.3b preset: 24 x 2048, 16 heads, seq 2048, vocab 51200, dropout)
//! at a size the CPU runs in a second: 2 x 128, 2 heads, seq 1024, vocab 3200.
Plan LongSeqPlan(const std::string& layout, int64_t global_batch) {
  Plan p = testing::TinyPlan(layout, global_batch);
  p.model.name = "gpt-1.3b-shaped";
  p.model.layers = 2;
  p.model.hidden = 128;
  p.model.heads = 2;
  p.model.kv_heads = 2;
  p.model.ffn_hidden = 512;
  p.model.seq_len = 1024;
  p.model.vocab = 3200;
  p.model.dropout = true;
  return p;
}

Plan PlanFor(const Case& c, int64_t global_batch) {
  switch (c.shape) {
    case Shape::kWide: return testing::WidePlan(c.layout, global_batch);
    case Shape::kLongSeq: return LongSeqPlan(c.layout, global_batch);
    case Shape::kTiny: break;
  }
  return testing::TinyPlan(c.layout, global_batch);
}

// Readable ctest names (gtest_discover_tests names each case by its printed value).
void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.shape == Shape::kWide ? "6x256 " : c.shape == Shape::kLongSeq ? "1.3b-shaped " : "tiny ") << c.layout;
}
struct PrecisionName {
  Precision p;
};
void PrintTo(const PrecisionName& p, std::ostream* os) { *os << ToString(p.p); }

class MemoryTruth : public ::testing::TestWithParam<std::tuple<Case, PrecisionName>> {};

TEST_P(MemoryTruth, PlannerIsAnUpperBoundWithinFifteenPercent) {
  const auto [c, named] = GetParam();
  const Precision precision = named.p;
  Plan plan = PlanFor(c, c.shape == Shape::kLongSeq ? 2 : 8);
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
    ::testing::Combine(::testing::Values(Case{"micro_batch=1", Shape::kTiny}, Case{"micro_batch=8", Shape::kTiny},
                                         Case{"micro_batch=4,recompute=full", Shape::kTiny},
                                         Case{"micro_batch=2,recompute=selective", Shape::kTiny},
                                         Case{"micro_batch=1", Shape::kWide}, Case{"micro_batch=4", Shape::kWide},
                                         Case{"micro_batch=4,recompute=full", Shape::kWide},
                                         Case{"micro_batch=2,recompute=selective", Shape::kWide},
                                         Case{"micro_batch=1", Shape::kLongSeq},
                                         Case{"micro_batch=2,recompute=selective", Shape::kLongSeq}),
                       ::testing::Values(PrecisionName{Precision::kFp32}, PrecisionName{Precision::kBf16},
                                         PrecisionName{Precision::kFp16})));

}  // namespace
}  // namespace parallax::executor
