// Pipeline schedules: completeness, dependency-feasibility (no deadlock with buffered sends)
// and the in-flight micro-batch bounds that the memory model relies on.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "model/schedule.h"

namespace parallax {
namespace {

struct Outcome {
  bool completed = false;
  std::vector<int64_t> max_in_flight;  // per pipeline rank, micro-batch chunks held for backward
};

// Runs every rank's order against the cross-stage data dependencies: a forward of stage s needs
// stage s-1's forward of the same micro-batch; a backward needs its own forward and stage s+1's
// backward. Sends never block (buffered), receives wait.
Outcome Execute(ScheduleKind kind, int64_t pp, int64_t m, int64_t v) {
  const int64_t stages = pp * v;
  std::vector<std::vector<PipeOp>> orders;
  for (int64_t r = 0; r < pp; ++r) orders.push_back(PipelineOrder(kind, pp, r, m, v));
  std::set<std::pair<int64_t, int64_t>> fwd, bwd;  // (stage, micro-batch)
  std::vector<size_t> next(pp, 0);
  Outcome out;
  out.max_in_flight.assign(pp, 0);
  std::vector<int64_t> in_flight(pp, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t r = 0; r < pp; ++r) {
      while (next[r] < orders[r].size()) {
        const PipeOp& op = orders[r][next[r]];
        const int64_t st = ModelStage(pp, r, op.chunk);
        if (op.kind == PipeOpKind::kForward) {
          if (st > 0 && !fwd.count({st - 1, op.microbatch})) break;
          fwd.insert({st, op.microbatch});
          out.max_in_flight[r] = std::max(out.max_in_flight[r], ++in_flight[r]);
        } else {
          if (!fwd.count({st, op.microbatch})) break;
          if (st < stages - 1 && !bwd.count({st + 1, op.microbatch})) break;
          bwd.insert({st, op.microbatch});
          --in_flight[r];
        }
        ++next[r];
        progress = true;
      }
    }
  }
  out.completed = static_cast<int64_t>(bwd.size()) == stages * m;
  return out;
}

TEST(Schedule, EveryOpExactlyOnceWithBackwardAfterForward) {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    for (int64_t pp : {2, 4}) {
      const int64_t v = kind == ScheduleKind::kInterleaved ? 2 : 1;
      for (int64_t m : {pp, 2 * pp, 3 * pp}) {
        for (int64_t r = 0; r < pp; ++r) {
          const auto order = PipelineOrder(kind, pp, r, m, v);
          ASSERT_EQ(static_cast<int64_t>(order.size()), 2 * m * v);
          std::set<std::tuple<int, int64_t, int64_t>> seen;
          std::set<std::pair<int64_t, int64_t>> forwarded;
          for (const PipeOp& op : order) {
            EXPECT_TRUE(seen.insert({static_cast<int>(op.kind), op.microbatch, op.chunk}).second);
            EXPECT_GE(op.chunk, 0);
            EXPECT_LT(op.chunk, v);
            if (op.kind == PipeOpKind::kForward) forwarded.insert({op.microbatch, op.chunk});
            else EXPECT_TRUE(forwarded.count({op.microbatch, op.chunk})) << ToString(kind);
          }
        }
      }
    }
  }
}

TEST(Schedule, NoDeadlockAndMemoryBounds) {
  for (int64_t pp : {2, 3, 4, 8}) {
    for (int64_t m : {pp, 2 * pp, 4 * pp + (pp > 2 ? 1 : 0)}) {
      const Outcome g = Execute(ScheduleKind::kGpipe, pp, m, 1);
      ASSERT_TRUE(g.completed);
      for (int64_t r = 0; r < pp; ++r) EXPECT_EQ(g.max_in_flight[r], m);
      const Outcome f = Execute(ScheduleKind::kOneFOneB, pp, m, 1);
      ASSERT_TRUE(f.completed) << "1f1b pp=" << pp << " m=" << m;
      // 1F1B keeps at most pp - rank micro-batches in flight on rank `rank`.
      for (int64_t r = 0; r < pp; ++r) EXPECT_EQ(f.max_in_flight[r], std::min(pp - r, m)) << r;
    }
  }
}

TEST(Schedule, InterleavedCompletesAndBoundsInFlight) {
  for (int64_t pp : {2, 4}) {
    for (int64_t v : {2, 3}) {
      for (int64_t m : {pp, 2 * pp, 4 * pp}) {
        const Outcome o = Execute(ScheduleKind::kInterleaved, pp, m, v);
        ASSERT_TRUE(o.completed) << "pp=" << pp << " v=" << v << " m=" << m;
        for (int64_t r = 0; r < pp; ++r) {
          // Megatron's warm-up: (pp - r - 1) * 2 + (v - 1) * pp forwards, plus the steady one.
          const int64_t bound = m == pp ? m * v : std::min(m * v, (pp - r - 1) * 2 + (v - 1) * pp + 1);
          EXPECT_LE(o.max_in_flight[r], bound);
        }
      }
    }
  }
}

TEST(Schedule, OneFOneBOrderOnLastRankAlternates) {
  const auto order = PipelineOrder(ScheduleKind::kOneFOneB, 4, 3, 3, 1);
  const std::vector<PipeOp> expect = {{PipeOpKind::kForward, 0, 0}, {PipeOpKind::kBackward, 0, 0},
                                      {PipeOpKind::kForward, 1, 0}, {PipeOpKind::kBackward, 1, 0},
                                      {PipeOpKind::kForward, 2, 0}, {PipeOpKind::kBackward, 2, 0}};
  EXPECT_EQ(order, expect);
}

TEST(Schedule, ValidationRules) {
  EXPECT_TRUE(ValidateSchedule(ScheduleKind::kOneFOneB, 4, 7, 1));
  EXPECT_FALSE(ValidateSchedule(ScheduleKind::kOneFOneB, 4, 8, 2));
  EXPECT_FALSE(ValidateSchedule(ScheduleKind::kInterleaved, 1, 8, 2));
  EXPECT_FALSE(ValidateSchedule(ScheduleKind::kInterleaved, 4, 6, 2));
  EXPECT_TRUE(ValidateSchedule(ScheduleKind::kInterleaved, 4, 8, 2));
  EXPECT_FALSE(ValidateSchedule(ScheduleKind::kGpipe, 2, 0, 1));
}

}  // namespace
}  // namespace parallax
