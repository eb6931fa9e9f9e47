// refine's end-to-end contention from a measured trace (profiler/refine/refine.h TraceContention):
// the time inside a gradient reduction's window that no compute op covers, against its predicted
// isolated length, in the planner's overlap model.
#include <gtest/gtest.h>

#include "planner/sim/trace_recorder.h"
#include "profiler/calibrate/calibrate.h"
#include "profiler/refine/refine.h"
#include "traces/diff.h"

namespace parallax::profiler {
namespace {

constexpr double kUs = 1e-6;

struct Op {
  traces::Stream stream;
  OpKind op;
  int64_t layer;
  double start_us, dur_us;
};

traces::Trace Record(const std::vector<Op>& ops) {
  Plan plan;
  planner::SimOptions so;
  planner::TraceRecorder rec(plan, so);
  for (const Op& o : ops) {
    const Phase ph = o.stream == traces::Stream::kDpComm ? Phase::kComm : Phase::kBwd;
    rec.Record(0, o.stream, o.op, ph, 0, 0, o.layer, o.start_us * kUs, o.dur_us * kUs, -1, 1024);
  }
  return rec.Take();
}

std::optional<double> Contention(const std::vector<Op>& predicted, const std::vector<Op>& measured) {
  const traces::Trace p = Record(predicted);
  const traces::Trace m = Record(measured);
  const traces::Alignment al = traces::AlignSlices(p, m);
  return TraceContention(p, m, al);
}

const auto kC = traces::Stream::kCompute;
const auto kD = traces::Stream::kDpComm;

TEST(TraceContention, UncoveredWindowAgainstIsolatedLength) {
  // Predicted: the layer-1 all-reduce takes 50 us beside layer 0's backward.
  const std::vector<Op> pred = {{kC, OpKind::kFc2, 1, 0, 100}, {kD, OpKind::kDpAllReduce, 1, 100, 50},
                                {kC, OpKind::kFc2, 0, 100, 100}};
  // Measured: it took 80 us, and the compute stopped for 30 us of it (progress on the host).
  const std::vector<Op> meas = {{kC, OpKind::kFc2, 1, 0, 100}, {kD, OpKind::kDpAllReduce, 1, 100, 80},
                                {kC, OpKind::kFc2, 0, 130, 100}};
  const auto k = Contention(pred, meas);
  ASSERT_TRUE(k.has_value());
  EXPECT_NEAR(*k, 1.0 / (1.0 - 30.0 / 50.0), 1e-6);  // 2.5
  // Fully covered: the compute hid it all.
  const std::vector<Op> hidden = {{kC, OpKind::kFc2, 1, 0, 100}, {kD, OpKind::kDpAllReduce, 1, 100, 80},
                                  {kC, OpKind::kFc2, 0, 100, 100}};
  EXPECT_DOUBLE_EQ(*Contention(pred, hidden), 1.0);
  // Uncovered as long as the isolated collective: nothing hidden.
  const std::vector<Op> serial = {{kC, OpKind::kFc2, 1, 0, 100}, {kD, OpKind::kDpAllReduce, 1, 100, 60},
                                  {kC, OpKind::kFc2, 0, 160, 100}};
  EXPECT_DOUBLE_EQ(*Contention(pred, serial), kMaxContention);
}

TEST(TraceContention, TailReductionsAndGathersDoNotCount) {
  // The last bucket after the backward ends is exposed in the model already; a ZeRO-3 gather is
  // waited for. Neither says how much compute hides.
  const std::vector<Op> pred = {{kC, OpKind::kFc2, 0, 0, 100}, {kD, OpKind::kDpAllReduce, 0, 100, 50},
                                {kD, OpKind::kDpAllGather, 1, 0, 20}, {kC, OpKind::kFc2, 1, 20, 50}};
  const std::vector<Op> meas = {{kC, OpKind::kFc2, 0, 0, 100}, {kD, OpKind::kDpAllReduce, 0, 100, 90},
                                {kD, OpKind::kDpAllGather, 1, 0, 30}, {kC, OpKind::kFc2, 1, 40, 50}};
  EXPECT_FALSE(Contention(pred, meas).has_value());
}

}  // namespace
}  // namespace parallax::profiler
