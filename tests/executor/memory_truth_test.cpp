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
#include <algorithm>
#include <vector>

#include "executor/cpu/local_communicator.h"
#include "planner/memory/memory_model.h"
#include "planner/search/search.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

enum class Shape { kTiny, kWide, kLongSeq, kMla };

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
    case Shape::kMla: return testing::MlaPlan(c.layout, global_batch);
    case Shape::kTiny: break;
  }
  return testing::TinyPlan(c.layout, global_batch);
}

// Readable ctest names (gtest_discover_tests names each case by its printed value).
void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.shape == Shape::kWide      ? "6x256 "
          : c.shape == Shape::kLongSeq ? "1.3b-shaped "
          : c.shape == Shape::kMla     ? "mla-tiny "
                                       : "tiny ")
      << c.layout;
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
                                         Case{"micro_batch=2,recompute=selective", Shape::kLongSeq},
                                         Case{"micro_batch=4", Shape::kMla}, Case{"micro_batch=4,recompute=full", Shape::kMla}),
                       ::testing::Values(PrecisionName{Precision::kFp32}, PrecisionName{Precision::kBf16},
                                         PrecisionName{Precision::kFp16})));

// A plan the planner calls feasible never runs out of memory on our executor: the search over one
// rank of a 6 x 256 model in bf16 (micro-batch, recompute, schedule), on a device whose memory is the
// median predicted peak of six of its layouts, so that the largest are rejected for memory (2 of 12
// on 2026-11-27); every plan it keeps then trains two steps under an allocator limit of that memory
// (an allocation over it fails the step), and peaks within it.
TEST(MemoryTruthSearch, EveryPlanTheSearchCallsFeasibleTrainsWithinTheDeviceMemory) {
  Plan base = testing::WidePlan("micro_batch=1", 8);
  base.training.precision = Precision::kBf16;
  base.cluster.nodes = 1;
  base.cluster.gpus_per_node = 1;
  std::vector<int64_t> peaks;
  for (const char* l : {"micro_batch=1", "micro_batch=2", "micro_batch=4", "micro_batch=8",
                        "micro_batch=8,recompute=selective", "micro_batch=8,recompute=full"}) {
    Plan p = base;
    p.layout = *ParseInlineLayout(l);
    p.layout.global_batch = 8;
    peaks.push_back(planner::PeakMemoryBytes(p));
  }
  std::sort(peaks.begin(), peaks.end());
  const int64_t cap = peaks[peaks.size() / 2];
  base.cluster.device.memory_GiB = static_cast<double>(cap) / (1024.0 * 1024.0 * 1024.0);
  planner::SearchOptions opt;
  opt.top_k = 1000;
  opt.threads = 1;
  auto found = planner::Search(base.model, base.cluster, base.training, opt);
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_FALSE(found->plans.empty());
  ASSERT_GT(found->rejected.count("out_of_memory"), 0u) << "the memory limit must bite";
  std::printf("device memory %lld bytes: %zu feasible plans, %lld rejected for memory\n", static_cast<long long>(cap),
              found->plans.size(), static_cast<long long>(found->rejected.at("out_of_memory")));
  for (const planner::RankedPlan& rp : found->plans) {
    Plan plan = base;
    plan.layout = rp.layout;
    plan.training.global_batch = rp.layout.global_batch;
    CpuBackend backend;
    backend.SetMemoryLimit(cap);
    auto world = LocalCommunicator();
    auto t = Trainer::Create(plan, backend, *world, {});
    ASSERT_TRUE(t) << LayoutToString(rp.layout) << ": " << t.error().message;
    for (int i = 0; i < 2; ++i) {
      auto r = (*t)->Step();
      ASSERT_TRUE(r) << LayoutToString(rp.layout) << ": " << r.error().message;
    }
    const int64_t peak = backend.memory().peak_bytes;
    std::printf("  %-72s planner %10lld measured %10lld\n", LayoutToString(rp.layout).c_str(),
                static_cast<long long>(rp.prediction.peak_memory_bytes), static_cast<long long>(peak));
    EXPECT_LE(peak, cap) << LayoutToString(rp.layout);
  }
}

}  // namespace
}  // namespace parallax::executor
