// Predicted-vs-measured alignment and diff.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/traces/identity_util.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/diff.h"
#include "traces/tracer.h"

namespace parallax::traces {
namespace {

using testing::Id;

// Two steps x 2 micro-batches x 2 layers of (qkv fwd 100 ns, fc1 fwd 200 ns, tp all-reduce 50 ns).
// `scale_qkv` / `scale_fc1` stretch those ops; `reverse` records in the opposite order.
// `steps` steps; step 0 stretched by `warmup` (a measured warm-up step).
Trace MakeTrace(const char* kind, double scale_qkv, double scale_fc1, bool reverse, bool extra, int64_t steps = 2,
                double warmup = 1.0) {
  Tracer tr(kind);
  const TrackId c = tr.Track(0, Stream::kCompute);
  const TrackId tp = tr.Track(0, Stream::kTpComm);
  struct Rec {
    TrackId track;
    OpIdentity id;
    int64_t start, dur;
  };
  std::vector<Rec> recs;
  for (int64_t step = 0; step < steps; ++step) {
    int64_t t = step * 100000;
    const double w = step == 0 ? warmup : 1.0;
    for (int64_t mb = 0; mb < 2; ++mb) {
      for (int64_t layer = 0; layer < 2; ++layer) {
        const auto q = static_cast<int64_t>(100 * scale_qkv * w);
        const auto f = static_cast<int64_t>(200 * scale_fc1 * w);
        recs.push_back({c, Id(step, 0, mb, layer, OpKind::kQkv, Phase::kFwd), t, q});
        t += q;
        recs.push_back({c, Id(step, 0, mb, layer, OpKind::kFc1, Phase::kFwd), t, f});
        t += f;
        recs.push_back({tp, Id(step, 0, mb, layer, OpKind::kTpAllReduce, Phase::kFwd), t, 50});
        t += 50;
      }
    }
  }
  if (reverse) std::reverse(recs.begin(), recs.end());
  for (const Rec& r : recs) tr.Record(r.track, tr.OpName(r.id.op), r.start, r.dur, r.id);
  if (extra) tr.Record(c, tr.OpName(OpKind::kOptimizer), 400000, 10, Id(1, 0, -1, -1, OpKind::kOptimizer, Phase::kOptim));
  return tr.Take();
}

// The measured step time (model/step_time.h): the median over the compared steps of the slowest
// rank's span. Two ranks whose clocks start 30 us apart (two hosts, or two processes' own time
// origins) do not stretch a step, and one step another process slowed 5x does not move it.
TEST(Diff, TheStepTimeIsTheMedianOfTheSlowestRanksSpans) {
  auto trace = [](const char* kind, int64_t steps, int64_t slow_step, int64_t rank1_offset) {
    Tracer tr(kind);
    for (int64_t rank = 0; rank < 2; ++rank) {
      const TrackId c = tr.Track(rank, Stream::kCompute);
      for (int64_t step = 0; step < steps; ++step) {
        int64_t t = step * 100000 + (rank == 1 ? rank1_offset : 0);
        const int64_t dur = (step == slow_step ? 5 : 1) * (rank == 1 ? 300 : 200);
        for (int64_t layer = 0; layer < 2; ++layer) {
          tr.Record(c, tr.OpName(OpKind::kFc1), t, dur, Id(step, rank, 0, layer, OpKind::kFc1, Phase::kFwd));
          t += dur;
        }
      }
    }
    return tr.Take();
  };
  const Trace p = trace("predicted", 1, -1, 0);
  const Trace m = trace("measured", 5, 2, 30000);
  const TraceDiff d = DiffTraces(p, m);
  EXPECT_EQ(d.measured_steps, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(d.measured_step_ns, 600);  // rank 1's 2 x 300 ns; step 2's 3000 ns is the outlier
  EXPECT_EQ(d.predicted_step_ns, 600);
  EXPECT_DOUBLE_EQ(d.step_time_error, 0.0);
}

TEST(Diff, AlignsByIdentityRegardlessOfRecordingOrder) {
  const Trace p = MakeTrace("predicted", 1.0, 1.0, false, false);
  const Trace m = MakeTrace("measured", 1.1, 0.9, true, true);
  const Alignment al = AlignSlices(p, m);
  EXPECT_EQ(al.mode, AlignMode::kIdentity);
  ASSERT_EQ(al.pairs.size(), 24u);
  EXPECT_EQ(al.only_predicted, 0);
  EXPECT_EQ(al.only_measured, 1);
  for (const auto& [pi, mi] : al.pairs) EXPECT_EQ(p.identity(p.slice(pi)), m.identity(m.slice(mi)));
}

TEST(Diff, OneStepPredictionIsComparedWithEveryMeasuredStepButTheWarmUp) {
  const Trace p = MakeTrace("predicted", 1.0, 1.0, false, false, 1);
  const Trace m = MakeTrace("measured", 1.0, 1.0, false, false, 4, 10.0);  // step 0: 10x slower
  const TraceDiff d = DiffTraces(p, m);
  EXPECT_EQ(d.matched, 3 * 12);  // steps 1..3, 12 slices each
  EXPECT_EQ(d.only_predicted, 0);
  EXPECT_EQ(d.only_measured, 0);  // the warm-up step is left out, not counted as unmatched
  EXPECT_EQ(d.measured_steps, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(d.predicted_step, 0);
  EXPECT_EQ(d.predicted_step_ns, d.measured_step_ns);  // identical steady-state steps
  EXPECT_DOUBLE_EQ(d.step_time_error, 0.0);
  for (const OpDiff& o : d.per_op) EXPECT_DOUBLE_EQ(o.rel_error, 0.0) << o.op;
  EXPECT_NE(FormatDiff(d).find("predicted step 0 against measured steps 1,2,3"), std::string::npos);

  // An explicit step: the warm-up itself, 10x slower than predicted.
  DiffOptions o;
  o.steps.measured_step = 0;
  const TraceDiff w = DiffTraces(p, m, o);
  EXPECT_EQ(w.matched, 12);
  EXPECT_EQ(w.measured_steps, (std::vector<int64_t>{0}));
  EXPECT_LT(w.step_time_error, -0.8);
  // A step the measured trace lacks: nothing pairs.
  o.steps.measured_step = 9;
  EXPECT_EQ(DiffTraces(p, m, o).matched, 0);
  // One measured step: compared as it is.
  const Trace m1 = MakeTrace("measured", 1.0, 1.0, false, false, 1);
  EXPECT_EQ(DiffTraces(p, m1).matched, 12);
}

TEST(Diff, PerOpTotalsStepTimeAndLargestMismatches) {
  const Trace p = MakeTrace("predicted", 1.0, 1.0, false, false);
  const Trace m = MakeTrace("measured", 1.1, 0.9, true, false);
  DiffOptions o;
  o.top = 3;
  const TraceDiff d = DiffTraces(p, m, o);
  EXPECT_EQ(d.matched, 24);
  ASSERT_EQ(d.per_op.size(), 3u);
  std::map<std::string, OpDiff> by_op;
  for (const OpDiff& x : d.per_op) by_op[x.op] = x;
  EXPECT_EQ(by_op["qkv"].predicted_ns, 8 * 100);
  EXPECT_EQ(by_op["qkv"].measured_ns, 8 * 110);
  EXPECT_NEAR(by_op["qkv"].rel_error, 800.0 / 880.0 - 1.0, 1e-12);
  EXPECT_EQ(by_op["fc1"].measured_ns, 8 * 180);
  EXPECT_NEAR(by_op["fc1"].rel_error, 1600.0 / 1440.0 - 1.0, 1e-12);
  EXPECT_EQ(by_op["tp_allreduce"].rel_error, 0.0);
  EXPECT_EQ(by_op["qkv"].phase, "fwd");
  // Step span: predicted 4 x 350 = 1400 ns, measured 4 x (110 + 180 + 50) = 1360 ns.
  EXPECT_EQ(d.steps, 2);
  EXPECT_EQ(d.predicted_step_ns, 1400);
  EXPECT_EQ(d.measured_step_ns, 1360);
  EXPECT_NEAR(d.step_time_error, 1400.0 / 1360.0 - 1.0, 1e-12);
  // The largest absolute mismatches are the fc1 slices (20 ns off, vs 10 ns for qkv).
  ASSERT_EQ(d.largest.size(), 3u);
  for (const Mismatch& mm : d.largest) {
    EXPECT_EQ(mm.predicted_ns - mm.measured_ns, 20);
    EXPECT_NE(mm.what.find("fc1 fwd"), std::string::npos) << mm.what;
  }
  const Json j = DiffToJson(d);
  EXPECT_EQ(j["alignment"], "identity");
  EXPECT_EQ(j["matched"], 24);
  EXPECT_EQ(j["step_time"]["predicted_ns"], 1400);
  EXPECT_EQ(j["largest_mismatches"].size(), 3u);
  EXPECT_NE(FormatDiff(d).find("fc1"), std::string::npos);
}

TEST(Diff, IdentitiesSurviveTheChromeJsonRoundTrip) {
  const Trace p = MakeTrace("predicted", 1.0, 1.0, false, false);
  const auto path = std::filesystem::temp_directory_path() / "parallax_diff_roundtrip.json.gz";
  ASSERT_TRUE(WriteChromeTrace(p, path.string()).ok());
  auto back = ReadChromeTrace(path.string());
  ASSERT_TRUE(back.ok()) << back.error().message;
  const TraceDiff d = DiffTraces(p, *back);
  EXPECT_EQ(d.mode, AlignMode::kIdentity);
  EXPECT_EQ(d.matched, 24);
  EXPECT_EQ(d.only_predicted + d.only_measured, 0);
  for (const OpDiff& o : d.per_op) EXPECT_EQ(o.rel_error, 0.0) << o.op;
  EXPECT_EQ(d.step_time_error, 0.0);
  std::filesystem::remove(path);
}

TEST(Diff, FallsBackToNameAndOrderWithoutIdentities) {
  Tracer a, b;
  const TrackId ca = a.Track(0, Stream::kCompute);
  const TrackId cb = b.Track(0, Stream::kCompute);
  // a: gemm 10, gemm 20, softmax 5 ; b: softmax 7, gemm 11, gemm 26, gemm 1 (one extra)
  a.Record(ca, a.Intern("gemm"), 0, 10);
  a.Record(ca, a.Intern("gemm"), 10, 20);
  a.Record(ca, a.Intern("softmax"), 30, 5);
  b.Record(cb, b.Intern("softmax"), 0, 7);
  b.Record(cb, b.Intern("gemm"), 10, 11);
  b.Record(cb, b.Intern("gemm"), 30, 26);
  b.Record(cb, b.Intern("gemm"), 60, 1);
  b.Record(cb, b.Intern("only_in_b"), 70, 1);
  const TraceDiff d = DiffTraces(a.trace(), b.trace());
  EXPECT_EQ(d.mode, AlignMode::kNameOrder);
  EXPECT_EQ(d.matched, 3);
  EXPECT_EQ(d.only_measured, 2);
  EXPECT_EQ(d.only_predicted, 0);
  std::map<std::string, OpDiff> by_op;
  for (const OpDiff& x : d.per_op) by_op[x.op] = x;
  EXPECT_EQ(by_op["gemm"].predicted_ns, 30);
  EXPECT_EQ(by_op["gemm"].measured_ns, 37);
  EXPECT_EQ(by_op["softmax"].measured_ns, 7);
  ASSERT_FALSE(d.largest.empty());
  EXPECT_EQ(d.largest[0].what, "gemm #1");  // 20 vs 26
  EXPECT_EQ(d.predicted_step_ns, 35);
  EXPECT_EQ(d.measured_step_ns, 71);
}

TEST(Diff, KinetoTraceAgainstItselfMatchesEverySlice) {
  auto t = ReadChromeTrace(PARALLAX_TEST_DATA_DIR "/traces/kineto/nccl_parser_config__nccl_data.json.gz");
  ASSERT_TRUE(t.ok()) << t.error().message;
  const TraceDiff d = DiffTraces(*t, *t);
  EXPECT_EQ(d.mode, AlignMode::kNameOrder);
  EXPECT_EQ(d.matched, 26933);  // every X event; the 2 instants are not aligned
  EXPECT_EQ(d.only_predicted + d.only_measured, 0);
  EXPECT_EQ(d.step_time_error, 0.0);
}

}  // namespace
}  // namespace parallax::traces
