// refine's end-to-end contention from a measured trace (profiler/refine/trace_contention.h
// TraceContention): the time inside a gradient reduction's window that no compute op covers,
// against its predicted isolated length, in the planner's overlap model.
#include <gtest/gtest.h>

#include "planner/sim/trace_recorder.h"
#include "profiler/calibrate/calibrate.h"
#include "profiler/refine/sample_fit.h"
#include "profiler/refine/trace_contention.h"
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
  // The same with the grad-norm read after the last bucket: it waits for it.
  const std::vector<Op> pred_clip = {{kC, OpKind::kFc2, 0, 0, 100}, {kD, OpKind::kDpAllReduce, 0, 100, 50},
                                     {kC, OpKind::kGradClip, -1, 150, 10}};
  const std::vector<Op> meas_clip = {{kC, OpKind::kFc2, 0, 0, 100}, {kD, OpKind::kDpAllReduce, 0, 100, 90},
                                     {kC, OpKind::kGradClip, -1, 190, 10}};
  EXPECT_FALSE(Contention(pred_clip, meas_clip).has_value());
}

TEST(WindowedCollectiveTime, CostOfAPolledWindowLengthOfAConcurrentOne) {
  // Polled (CPU): a 150 us window holding a 50 us gap and compute that takes 97 us alone (100 us
  // measured): the collective cost 53 us; with compute hiding nothing (k = 100) t_m is about that.
  EXPECT_NEAR(WindowedCollectiveTime(150e-6, 50e-6, 97e-6, 100.0), 53e-6 * 100.0 / 99.0, 1e-12);
  // With k = 2, the model charges a covered collective half its length: t_m = 106 us.
  EXPECT_NEAR(WindowedCollectiveTime(150e-6, 50e-6, 97e-6, 2.0), 106e-6, 1e-12);
  // A concurrent collective (NCCL): compute slowed as the model says (k = 1.1, 91 us of compute in
  // a 100 us window) gives about the window back, and never more.
  EXPECT_NEAR(WindowedCollectiveTime(100e-6, 0, 91e-6, 1.1), 99e-6, 1e-12);
  EXPECT_DOUBLE_EQ(WindowedCollectiveTime(100e-6, 0, 85e-6, 1.1), 100e-6);
  // A window without compute (the rank waited for it): its length.
  EXPECT_DOUBLE_EQ(WindowedCollectiveTime(30e-6, 30e-6, 0, 100.0), 30e-6);
  // k = 1: compute hides a covered collective entirely, so only the window says how long it ran.
  EXPECT_DOUBLE_EQ(WindowedCollectiveTime(150e-6, 50e-6, 97e-6, 1.0), 150e-6);
  // Compute that ran faster than its alone pace cannot make the cost less than the gap.
  EXPECT_NEAR(WindowedCollectiveTime(150e-6, 50e-6, 120e-6, 100.0), 50e-6 * 100.0 / 99.0, 1e-12);
}

}  // namespace
}  // namespace parallax::profiler
