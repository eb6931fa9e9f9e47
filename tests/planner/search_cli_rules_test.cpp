// --fix reaches any valid value of a dimension, and rejects impossible ones by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "model/implementation.h"
#include "model/load.h"
#include "planner/search/constraints.h"
#include "planner/search/search.h"

namespace parallax::planner {
namespace {

SearchResult SearchWith(const char* model, int64_t global_batch, const char* fix) {
  auto c = ParseConstraints(fix);
  EXPECT_TRUE(c) << c.error().message;
  SearchOptions o;
  o.fix = *c;
  o.top_k = 3;
  o.threads = 1;
  TrainingSpec t;
  t.global_batch = global_batch;
  auto r = Search(*ResolveModel(model), *ResolveCluster("dgx-a100"), t, o);
  EXPECT_TRUE(r) << r.error().message;
  return r ? *r : SearchResult{};
}

TEST(SearchFix, MicroBatchOutsideTheDefaultGrid) {
  const SearchResult r = SearchWith("gpt-1.3b", 48, "micro_batch=3,tp=1,dp=8");
  ASSERT_FALSE(r.plans.empty());
  for (const auto& p : r.plans) {
    EXPECT_EQ(p.layout.micro_batch, 3);
    EXPECT_EQ(p.layout.dp, 8);
  }
}

TEST(SearchFix, InterleavedWithOneVirtualStage) {
  const SearchResult r = SearchWith("gpt-1.3b", 64, "schedule=interleaved,virtual_stages=1,pp=2");
  ASSERT_FALSE(r.plans.empty());
  for (const auto& p : r.plans) {
    EXPECT_EQ(p.layout.schedule, ScheduleKind::kInterleaved);
    EXPECT_EQ(p.layout.virtual_stages, 1);
  }
  const SearchResult v4 = SearchWith("gpt-1.3b", 64, "virtual_stages=4,pp=2");
  ASSERT_FALSE(v4.plans.empty());
  for (const auto& p : v4.plans) EXPECT_EQ(p.layout.virtual_stages, 4);
}

TEST(SearchFix, ImpossibleValuesAreNamed) {
  struct Bad {
    const char* fix;
    const char* msg;
  };
  for (const Bad& b : {Bad{"tp=0", "--fix: tp must be > 0 (got 0)"}, Bad{"micro_batch=-2", "--fix: micro_batch must be > 0"},
                       Bad{"zero=4", "--fix: zero must be 0, 1, 2 or 3 (got 4)"}, Bad{"tq=2", "--fix: plan: /tq: unknown key"}}) {
    auto c = ParseConstraints(b.fix);
    ASSERT_FALSE(c) << b.fix;
    EXPECT_NE(c.error().message.find(b.msg), std::string::npos) << c.error().message;
  }
}

// The search enumerates only the ZeRO stages the implementation runs (max_zero_stage): Megatron-LM
// v2.x none, Megatron-Core r0.8 its distributed optimizer (ZeRO-1), DeepSpeed and our executor all
// three. With pipeline parallelism (max_zero_stage_pipelined) DeepSpeed runs ZeRO-1 at most (its
// pipeline engine refuses ZeRO-2/3); the others the same stages as without. The stages left out are
// counted as a rejection.
TEST(SearchImplementation, ZeroStagesTheImplementationRuns) {
  struct Expect {
    const char* name;
    int64_t max, max_pipelined;
  };
  for (const Expect& e : {Expect{"megatron-2021", 0, 0}, Expect{"megatron-core", 1, 1}, Expect{"deepspeed", 3, 1},
                          Expect{"parallax", 3, 3}}) {
    SearchOptions o;
    o.implementation = *ImplementationPreset(e.name);
    EXPECT_EQ(o.implementation.max_zero_stage.value, e.max) << e.name;
    EXPECT_EQ(MaxZeroStage(o.implementation, 2), e.max_pipelined) << e.name;
    o.top_k = 3;
    o.threads = 1;
    o.record_candidates = true;
    TrainingSpec t;
    t.global_batch = 64;
    auto r = Search(*ResolveModel("gpt-1.3b"), *ResolveCluster("dgx-a100"), t, o);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_FALSE(r->plans.empty()) << e.name;
    int64_t highest_flat = 0, highest_pipelined = 0;
    for (const auto& c : r->candidates) {
      if (!c.rejected.empty()) continue;
      int64_t& h = c.layout.pp > 1 ? highest_pipelined : highest_flat;
      h = std::max(h, c.layout.zero_stage);
    }
    EXPECT_EQ(highest_flat, e.max) << e.name;
    EXPECT_EQ(highest_pipelined, e.max_pipelined) << e.name;
    const auto it = r->rejected.find("zero_stage_beyond_implementation");
    EXPECT_EQ(it != r->rejected.end() && it->second > 0, e.max_pipelined < 3) << e.name;
  }
}

// A pinned tp the walk never reaches is counted with its reason, so `plan` can say why nothing is left.
TEST(SearchFix, APinnedTpNoLayoutCanHoldIsCountedWithItsReason) {
  for (const auto& [fix, reason] : std::vector<std::pair<const char*, const char*>>{
           {"tp=3", "tp_does_not_tile_the_nodes"}, {"tp=12", "tp_does_not_tile_the_nodes"},
           {"tp=16", "tp_does_not_tile_the_nodes"}}) {
    const SearchResult r = SearchWith("gpt-1.3b", 64, fix);
    EXPECT_TRUE(r.plans.empty()) << fix;
    EXPECT_EQ(r.rejected.count(reason), 1u) << fix;
  }
}

// Layouts the model prices alike (1F1B and interleaved with one virtual stage) tie on speed: the
// ranking breaks ties by enumeration order, so it is the same whatever the thread count.
TEST(SearchRanking, TiesRankTheSameWhateverTheThreadCount) {
  auto c = ParseConstraints("virtual_stages=1,pp=2");
  ASSERT_TRUE(c) << c.error().message;
  SearchOptions o;
  o.fix = *c;
  o.top_k = 40;
  TrainingSpec t;
  t.global_batch = 64;
  std::vector<std::string> reference;
  for (int threads : {1, 2, 3, 5}) {
    o.threads = threads;
    auto r = Search(*ResolveModel("gpt-1.3b"), *ResolveCluster("dgx-a100"), t, o);
    ASSERT_TRUE(r) << r.error().message;
    std::vector<std::string> ranked;
    bool tie = false;
    for (size_t i = 0; i < r->plans.size(); ++i) {
      ranked.push_back(LayoutToString(r->plans[i].layout));
      if (i > 0 && r->plans[i].prediction.step_time_s == r->plans[i - 1].prediction.step_time_s) tie = true;
    }
    if (threads == 1) {
      EXPECT_TRUE(tie) << "no two plans tie: the case does not test tie-breaking";
      reference = ranked;
    } else {
      EXPECT_EQ(ranked, reference) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace parallax::planner

