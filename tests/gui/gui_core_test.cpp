// Headless core tests (no widget): time <-> pixel mapping, ruler, row layout, level of detail,
// hit testing, range aggregates, search, comparison and candidates, data-driven where the
// cases are a table (hotspot's tst_timelinedelegate style).
#include <QtTest>
#include <cmath>

#include "gui/core/candidates.h"
#include "gui/core/compare_state.h"
#include "gui/core/document.h"
#include "gui/core/palette.h"
#include "gui/core/selection.h"
#include "gui/core/time_axis.h"
#include "gui/core/timeline_index.h"
#include "gui_test_data.h"
#include "traces/chrome_reader.h"
#include "traces/stats.h"
#include "traces/tracer.h"

using namespace parallax;
using namespace parallax::gui;

class TstGuiCore : public QObject {
  Q_OBJECT
 private slots:
  void timeToPixel_data() {
    QTest::addColumn<double>("start");
    QTest::addColumn<double>("ns_per_px");
    QTest::addColumn<double>("t");
    QTest::addColumn<double>("x");
    QTest::newRow("origin") << 0.0 << 1.0 << 0.0 << 0.0;
    QTest::newRow("1ns/px") << 1000.0 << 1.0 << 1500.0 << 500.0;
    QTest::newRow("1us/px") << 0.0 << 1000.0 << 2.5e6 << 2500.0;
    QTest::newRow("before start") << 1e9 << 1e6 << 0.0 << -1000.0;
    QTest::newRow("sub-ns") << 10.0 << 0.25 << 11.0 << 4.0;
  }
  void timeToPixel() {
    QFETCH(double, start);
    QFETCH(double, ns_per_px);
    QFETCH(double, t);
    QFETCH(double, x);
    TimeAxis a(start, ns_per_px);
    QCOMPARE(a.ToPx(t), x);
    QCOMPARE(a.ToNs(x), t);
  }

  void zoomKeepsCursorTime_data() {
    QTest::addColumn<double>("x");
    QTest::addColumn<double>("factor");
    QTest::newRow("in at left") << 0.0 << 0.5;
    QTest::newRow("in at middle") << 400.0 << 0.8;
    QTest::newRow("out at right") << 799.0 << 1.25;
  }
  void zoomKeepsCursorTime() {
    QFETCH(double, x);
    QFETCH(double, factor);
    TimeAxis a(5000, 10);
    const double t = a.ToNs(x);
    a.ZoomAround(x, factor);
    QCOMPARE(a.ns_per_px(), 10 * factor);
    QVERIFY(std::fabs(a.ToNs(x) - t) < 1e-6);
  }

  void panAndFit() {
    TimeAxis a;
    a.Fit(1000, 3000, 1000);
    QCOMPARE(a.ns_per_px(), 2.0);
    QCOMPARE(a.ToPx(3000), 1000.0);
    a.Pan(100);  // content moves right: earlier times appear at x = 0
    QCOMPARE(a.ToNs(0), 800.0);
  }

  void rulerTicks_data() {
    QTest::addColumn<double>("ns_per_px");
    QTest::addColumn<qlonglong>("step_ns");
    QTest::addColumn<QString>("second_label");
    QTest::newRow("1 ns/px") << 1.0 << 100LL << "100 ns";
    QTest::newRow("1 us/px") << 1000.0 << 100000LL << "100 us";
    QTest::newRow("3 us/px: ms labels") << 3000.0 << 500000LL << "0.5 ms";
    QTest::newRow("1 ms/px") << 1e6 << 100000000LL << "100 ms";
    QTest::newRow("40 ms/px") << 4e7 << 5000000000LL << "5 s";
  }
  void rulerUnitFollowsLargestLabel() {
    TimeAxis a(36e6, 4930);  // 36 .. 41.5 ms in view, 500 us steps
    const auto ticks = RulerTicks(a, 1200, 0, 90);
    QCOMPARE(QString::fromStdString(ticks[0].label), QString("36.0 ms"));
    QCOMPARE(QString::fromStdString(ticks[1].label), QString("36.5 ms"));
  }

  void rulerTicks() {
    QFETCH(double, ns_per_px);
    QFETCH(qlonglong, step_ns);
    QFETCH(QString, second_label);
    TimeAxis a(0, ns_per_px);
    const auto ticks = RulerTicks(a, 1000, 0, 90);
    QVERIFY(ticks.size() >= 2);
    QCOMPARE(ticks[1].ns - ticks[0].ns, static_cast<int64_t>(step_ns));
    QVERIFY((ticks[1].x_px - ticks[0].x_px) >= 90);
    QCOMPARE(QString::fromStdString(ticks[1].label), second_label);
  }

  void formatDuration_data() {
    QTest::addColumn<double>("ns");
    QTest::addColumn<QString>("text");
    QTest::newRow("ns") << 850.0 << "850 ns";
    QTest::newRow("us") << 12500.0 << "12.5 us";
    QTest::newRow("ms") << 3.2e6 << "3.2 ms";
    QTest::newRow("s") << 1.25e9 << "1.25 s";
  }
  void formatDuration() {
    QFETCH(double, ns);
    QFETCH(QString, text);
    QCOMPARE(QString::fromStdString(FormatDuration(ns)), text);
  }

  void rowLayoutOfKnownTrace() {
    const traces::Trace t = test::KnownTrace();
    auto ix = TimelineIndex::Build(t);
    QVERIFY(ix);
    QCOMPARE(ix->lanes().size(), size_t{2});
    QCOMPARE(QString::fromStdString(ix->lanes()[0].label), QString("rank 0"));
    // compute depth 0 (gemm), compute depth 1 (inner), tp-comm.
    QCOMPARE(ix->lanes()[0].rows.size(), size_t{3});
    const auto& rows = ix->rows();
    const TimelineRow& r0 = rows[ix->lanes()[0].rows[0]];
    const TimelineRow& r1 = rows[ix->lanes()[0].rows[1]];
    const TimelineRow& r2 = rows[ix->lanes()[0].rows[2]];
    QCOMPARE(r0.depth, 0);
    QCOMPARE(r0.slices.size(), size_t{10});
    QCOMPARE(t.Str(t.slice(r0.slices[0]).name), std::string_view("gemm"));
    QCOMPARE(r1.depth, 1);
    QCOMPARE(t.Str(t.slice(r1.slices[3]).name), std::string_view("inner"));
    QCOMPARE(t.track(r2.track).stream, traces::Stream::kTpComm);
    QCOMPARE(ix->lanes()[0].counter_rows.size(), size_t{1});
    QCOMPARE(ix->first_ns(), int64_t{1000});
    QCOMPARE(ix->last_ns(), int64_t{1000 + 200 * 9 + 100});
  }

  void levelOfDetail_data() {
    QTest::addColumn<double>("ns_per_px");
    QTest::addColumn<int>("boxes");
    QTest::addColumn<int>("merged_slices");
    // 10 gemm slices of 100 ns, 100 ns apart, in [1000, 2900).
    QTest::newRow("1 ns/px: every slice") << 1.0 << 10 << 0;
    QTest::newRow("100 ns/px: still wide enough") << 100.0 << 10 << 0;
    QTest::newRow("250 ns/px: gaps sub-pixel, one block") << 250.0 << 1 << 10;
    QTest::newRow("10 us/px: one block") << 10000.0 << 1 << 10;
  }
  void levelOfDetail() {
    QFETCH(double, ns_per_px);
    QFETCH(int, boxes);
    QFETCH(int, merged_slices);
    const traces::Trace t = test::KnownTrace();
    auto ix = TimelineIndex::Build(t);
    const size_t row = ix->lanes()[0].rows[0];
    int n = 0, merged = 0, covered = 0;
    ix->Visit(t, row, 0, 100000, ns_per_px, [&](const DrawBox& b) {
      ++n;
      covered += static_cast<int>(b.count);
      if (b.count > 1) merged += static_cast<int>(b.count);
    });
    QCOMPARE(n, boxes);
    QCOMPARE(merged, merged_slices);
    QCOMPARE(covered, 10);  // nothing is lost
  }

  void unsortedTrackIsSortedAndNested() {
    traces::Tracer tr;
    const auto c = tr.Track(0, traces::Stream::kCompute);
    tr.Record(c, tr.Intern("child"), 150, 20);  // recorded before its parent
    tr.Record(c, tr.Intern("late"), 500, 10);
    tr.Record(c, tr.Intern("parent"), 100, 100);
    const traces::Trace t = tr.Take();
    auto ix = TimelineIndex::Build(t);
    QCOMPARE(ix->rows().size(), size_t{2});
    QCOMPARE(ix->rows()[0].slices, (std::vector<uint32_t>{2, 1}));  // parent, late
    QCOMPARE(ix->rows()[1].slices, (std::vector<uint32_t>{0}));     // child at depth 1
    QCOMPARE(ix->rows()[0].groups[0].size(), size_t{1});
    QCOMPARE(ix->rows()[0].groups[0][0].max_gap_ns, 300);
    QCOMPARE(ix->rows()[0].groups[0][0].max_dur_ns, 100);
  }

  void lodMergesWithinAPixel() {
    // Two bursts of five 10-ns slices 20 ns apart, 10 us between the bursts.
    traces::Tracer tr;
    const auto c = tr.Track(0, traces::Stream::kCompute);
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t k = 0; k < 5; ++k) tr.Record(c, tr.Intern("k"), b * 10000 + 20 * k, 10);
    }
    const traces::Trace t = tr.Take();
    auto ix = TimelineIndex::Build(t);
    std::vector<DrawBox> boxes;
    ix->Visit(t, 0, 0, 100000, 100.0, [&](const DrawBox& b) { boxes.push_back(b); });
    QCOMPARE(boxes.size(), size_t{2});
    QCOMPARE(boxes[0].count, 5u);
    QCOMPARE(boxes[1].start_ns, int64_t{10000});
    boxes.clear();
    ix->Visit(t, 0, 0, 100000, 1e5, [&](const DrawBox& b) { boxes.push_back(b); });
    QCOMPARE(boxes.size(), size_t{1});  // the 10 us gap is sub-pixel too
    QCOMPARE(boxes[0].count, 10u);
  }

  //! Property on a real trace: at any zoom the boxes account for every slice in view exactly
  //! once, in time order, and a box never starts after the slices it stands for.
  void lodAccountsForEverySlice_data() {
    QTest::addColumn<double>("ns_per_px");
    for (double z : {1.0, 100.0, 1e4, 1e5, 1e6, 1e8})
      QTest::newRow(qPrintable(QString::number(z))) << z;
  }
  void lodAccountsForEverySlice() {
    QFETCH(double, ns_per_px);
    static auto t = traces::ReadChromeTrace(test::KinetoTrace().toStdString());
    QVERIFY(t);
    static auto ix = TimelineIndex::Build(*t);
    const int64_t span = ix->last_ns() - ix->first_ns();
    for (int64_t k = 0; k < 4; ++k) {
      const int64_t t0 = ix->first_ns() + span / 4 * k;
      const int64_t t1 = t0 + static_cast<int64_t>(ns_per_px * 1500);
      for (size_t r = 0; r < ix->rows().size(); ++r) {
        const auto& ids = ix->rows()[r].slices;
        size_t expected_first = ix->FirstEndingAfter(*t, r, t0), pos = expected_first;
        int64_t last_start = INT64_MIN;
        ix->Visit(*t, r, t0, t1, ns_per_px, [&](const DrawBox& b) {
          QCOMPARE(b.slice, ids[pos]);
          QVERIFY(b.start_ns <= t->slice(ids[pos]).start_ns && b.start_ns >= last_start);
          QVERIFY(b.end_ns >= t->slice(ids[pos + b.count - 1]).end_ns());
          last_start = b.start_ns;
          pos += b.count;
        });
        // Everything up to the first slice starting after t1 was accounted for (a last box may
        // reach beyond t1).
        size_t expected_end = expected_first;
        while (expected_end < ids.size() && t->slice(ids[expected_end]).start_ns <= t1)
          ++expected_end;
        QVERIFY(pos >= expected_end);
      }
    }
  }

  void visitClipsToRange() {
    const traces::Trace t = test::KnownTrace();
    auto ix = TimelineIndex::Build(t);
    std::vector<uint32_t> seen;
    ix->Visit(t, ix->lanes()[0].rows[0], 1450, 1850, 1.0,
              [&](const DrawBox& b) { seen.push_back(b.slice); });
    // gemm 2 [1400,1500), 3 [1600,1700), 4 [1800,1900).
    QCOMPARE(seen.size(), size_t{3});
    QCOMPARE(t.slice(seen[0]).start_ns, int64_t{1400});
    QCOMPARE(t.slice(seen[2]).start_ns, int64_t{1800});
  }

  void hitTest_data() {
    QTest::addColumn<qlonglong>("t");
    QTest::addColumn<qlonglong>("slop");
    QTest::addColumn<qlonglong>("expected_start");  // -1: nothing
    QTest::newRow("inside first") << 1050LL << 0LL << 1000LL;
    QTest::newRow("inside fifth") << 1899LL << 0LL << 1800LL;
    QTest::newRow("gap, no slop") << 1150LL << 0LL << -1LL;
    QTest::newRow("gap, nearest left") << 1120LL << 30LL << 1000LL;
    QTest::newRow("gap, nearest right") << 1190LL << 30LL << 1200LL;
    QTest::newRow("before all") << 10LL << 5LL << -1LL;
  }
  void hitTest() {
    QFETCH(qlonglong, t);
    QFETCH(qlonglong, slop);
    QFETCH(qlonglong, expected_start);
    const traces::Trace tr = test::KnownTrace();
    auto ix = TimelineIndex::Build(tr);
    auto hit = ix->HitTest(tr, ix->lanes()[0].rows[0], t, slop);
    if (expected_start < 0) {
      QVERIFY(!hit);
    } else {
      QVERIFY(hit);
      QCOMPARE(tr.slice(*hit).start_ns, static_cast<int64_t>(expected_start));
      QCOMPARE(ix->RowOfSlice(tr, *hit), std::optional<size_t>(ix->lanes()[0].rows[0]));
    }
  }

  void rangeAggregates() {
    const traces::Trace t = test::KnownTrace();
    auto ix = TimelineIndex::Build(t);
    // Rank 0 compute rows and tp row over [1000, 1950]: gemm 0..4, inner 0..4, allreduce 0..1.
    const auto& rows = ix->lanes()[0].rows;
    const auto agg = AggregateRange(t, *ix, rows, 1000, 1950);
    QCOMPARE(agg.size(), size_t{3});
    QCOMPARE(QString::fromStdString(agg[0].name), QString("allreduce"));  // 2 x 300 ns
    QCOMPARE(agg[0].count, int64_t{2});
    QCOMPARE(agg[0].total_ns, int64_t{600});
    QCOMPARE(agg[1].name, std::string("gemm"));
    QCOMPARE(agg[1].count, int64_t{5});
    QCOMPARE(agg[1].total_ns, int64_t{500});
    QCOMPARE(agg[1].p50_ns, int64_t{100});
    QCOMPARE(agg[2].name, std::string("inner"));
    QCOMPARE(agg[2].mean_ns, int64_t{50});
  }

  //! The whole range over every row equals `parallax trace stats`' per-name table (an
  //! independent computation in the traces library) on the real Kineto trace.
  void aggregatesMatchTraceStats() {
    auto t = traces::ReadChromeTrace(test::KinetoTrace().toStdString());
    QVERIFY2(t, t ? "" : t.error().message.c_str());
    auto ix = TimelineIndex::Build(*t);
    std::vector<size_t> all(ix->rows().size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    const auto agg = AggregateRange(*t, *ix, all, ix->first_ns(), ix->last_ns());
    const auto stats = traces::ComputeStats(*t, {.top_names = 100000});
    std::map<std::string, const NameAggregate*> by_name;
    for (const auto& a : agg) by_name[a.name] = &a;
    QVERIFY(stats.names.size() > 100);
    for (const auto& n : stats.names) {
      auto it = by_name.find(n.name);
      QVERIFY2(it != by_name.end(), n.name.c_str());
      QCOMPARE(it->second->count, n.count);
      QCOMPARE(it->second->total_ns, n.total_ns);
      QCOMPARE(it->second->p99_ns, n.p99_ns);
    }
    // Every slice is in exactly one row.
    size_t in_rows = 0;
    for (const auto& r : ix->rows()) in_rows += r.slices.size();
    QCOMPARE(in_rows, t->slices().size());
  }

  void rowsNeverOverlapOnRealTraces_data() {
    QTest::addColumn<QString>("file");
    QTest::newRow("kineto control") << test::KinetoTrace();
    QTest::newRow("kineto nccl") << QString(PARALLAX_TEST_DATA_DIR) +
                                        "/traces/kineto/nccl_parser_config__nccl_data.json.gz";
    QTest::newRow("simulated") << test::SimulatedTrace();
  }
  void rowsNeverOverlapOnRealTraces() {
    QFETCH(QString, file);
    auto t = traces::ReadChromeTrace(file.toStdString());
    QVERIFY2(t, t ? "" : t.error().message.c_str());
    auto ix = TimelineIndex::Build(*t);
    for (const auto& r : ix->rows()) {
      for (size_t i = 1; i < r.slices.size(); ++i) {
        QVERIFY(t->slice(r.slices[i - 1]).end_ns() <= t->slice(r.slices[i]).start_ns);
      }
    }
    QVERIFY(!ix->lanes().empty());
  }

  void search() {
    const traces::Trace t = test::KnownTrace();
    SliceSearch s;
    QCOMPARE(QString::fromStdString(s.Set(t, "^all")), QString());
    QCOMPARE(s.matches().size(), size_t{8});
    QVERIFY(s.IsMatch(t.slice(s.matches()[0]).name));
    const int64_t first = s.Next(t, 0);
    QCOMPARE(t.slice(static_cast<size_t>(first)).start_ns, int64_t{1000});
    const int64_t next = s.Next(t, 1000);
    QCOMPARE(t.slice(static_cast<size_t>(next)).start_ns, int64_t{1500});
    const int64_t wrap = s.Next(t, 99999);
    QCOMPARE(t.slice(static_cast<size_t>(wrap)).start_ns, int64_t{1000});
    const int64_t prev = s.Previous(t, 1500);
    QCOMPARE(t.slice(static_cast<size_t>(prev)).start_ns, int64_t{1000});
    QCOMPARE(s.Set(t, "GEMM").empty(), true);  // case-insensitive
    QCOMPARE(s.matches().size(), size_t{20});
    QVERIFY(!s.Set(t, "(").empty());  // bad pattern: a message
    QVERIFY(s.matches().empty());
  }

  void flowsOfSelectedSlice_data() {
    QTest::addColumn<qlonglong>("start");
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("flows");
    QTest::newRow("all-reduce 0: source") << 1000LL << "allreduce" << 1;
    QTest::newRow("gemm 2: destination") << 1400LL << "gemm" << 1;
    QTest::newRow("gemm 3: none") << 1600LL << "gemm" << 0;
  }
  void flowsOfSelectedSlice() {
    QFETCH(qlonglong, start);
    QFETCH(QString, name);
    QFETCH(int, flows);
    const traces::Trace t = test::KnownTrace();
    for (uint32_t i = 0; i < t.slices().size(); ++i) {
      const traces::Slice& s = t.slice(i);
      if (s.start_ns == start && t.Str(s.name) == name.toStdString() &&
          t.track(s.track).rank == 0) {
        QCOMPARE(static_cast<int>(FlowsOfSlice(t, i).size()), flows);
        return;
      }
    }
    QFAIL("slice not found");
  }

  void describeSlice() {
    const traces::Trace t = test::KnownTrace();
    const auto lines = DescribeSlice(t, 0, 1000);
    std::map<std::string, std::string> m(lines.begin(), lines.end());
    QCOMPARE(QString::fromStdString(m["name"]), QString("gemm"));
    QCOMPARE(QString::fromStdString(m["op"]), QString("fc1"));
    QCOMPARE(QString::fromStdString(m["duration"]), QString("100 ns"));
    QCOMPARE(QString::fromStdString(m["achieved"]), QString("10.0 TFLOP/s"));  // 1e6 FLOP / 100 ns
  }

  void stableColors() {
    QCOMPARE(ColorOfName("qkv"), ColorOfName("qkv"));
    QCOMPARE(FamilyOfName("qkv"), OpFamily::kGemm);
    QCOMPARE(FamilyOfName("tp_allreduce"), OpFamily::kTpComm);
    // The MoE layer's and the MTP module's GEMMs are GEMMs; their memory-bound ops are not.
    for (const char* gemm : {"router", "expert_fc1", "expert_fc2", "mtp_proj"}) QCOMPARE(FamilyOfName(gemm), OpFamily::kGemm);
    QCOMPARE(FamilyOfName("expert_act"), OpFamily::kPointwise);
    QCOMPARE(FamilyOfName("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"), OpFamily::kComm);
    QCOMPARE(FamilyOfName("Memcpy HtoD (Pinned -> Device)"), OpFamily::kMemory);
    QVERIFY(ErrorColor(0.5) != ErrorColor(-0.5));
    QCOMPARE(ErrorColor(0.0), Rgb{0xffebebeb});                    // exact: near white
    QCOMPARE(ErrorColor(7.0), ErrorColor(100.0));                  // saturated at 8x
    QCOMPARE(ErrorColor(-0.875), ErrorColor(-0.99));               // 1/8 and below
    QVERIFY((ErrorColor(1.0) & 0xff) < (ErrorColor(0.1) & 0xff));  // 2x is redder than 1.1x
  }

  // refine --attributed-trace: a framework's kernels carry no identity; compare shows those of the
  // selected step beside its ops and leaves the other steps' out.
  void compareShowsAFrameworksKernelsOfTheSelectedStep() {
    traces::Tracer pt("predicted");
    OpIdentity id;
    id.op = OpKind::kQkv;
    pt.Record(pt.Track(0, traces::Stream::kCompute), pt.OpName(OpKind::kQkv), 0, 100, id);
    traces::Tracer mt("measured");
    const traces::TrackId kernels = mt.CustomTrack(0, 100, "framework kernels 7", 0, traces::Stream::kOther);
    for (int64_t step : {0, 1}) {
      id.step = step;
      mt.Record(mt.Track(0, traces::Stream::kCompute), mt.OpName(OpKind::kQkv), 1000 * step, 90, id);
      mt.Record(kernels, mt.Intern(step == 0 ? "gemm of step 0" : "gemm of step 1"), 1000 * step + 10, 50);
    }
    CompareState cs(pt.Take(), mt.Take());
    QCOMPARE(cs.selected_step(), int64_t{1});
    int shown0 = 0, shown1 = 0;
    for (uint32_t i = 0; i < cs.display().slices().size(); ++i) {
      const std::string_view n = cs.display().Str(cs.display().slice(i).name);
      shown0 += n == "gemm of step 0" ? 1 : 0;
      shown1 += n == "gemm of step 1" ? 1 : 0;
    }
    QCOMPARE(shown0, 0);
    QCOMPARE(shown1, 1);
  }

  void compareHighlightsWorstOp() {
    const QString meas = test::MeasuredTrace();
    if (meas.isEmpty()) QSKIP("no MPI: parallax run cannot make a measured trace");
    auto p = traces::ReadChromeTrace(test::SimulatedTrace().toStdString());
    auto m = traces::ReadChromeTrace(meas.toStdString());
    QVERIFY(p && m);
    traces::DiffOptions opt;
    opt.top = 1;
    const auto diff = traces::DiffTraces(*p, *m, opt);
    CompareState cs(std::move(*p), std::move(*m));
    QCOMPARE(cs.mode(), traces::AlignMode::kIdentity);
    QVERIFY(!cs.ops().empty());
    QCOMPARE(cs.steps(), (std::vector<int64_t>{0, 1}));
    QCOMPARE(cs.selected_step(), int64_t{1});  // the warm-up step 0 is left out
    // Sorted by absolute error; the worst is the library's largest mismatch.
    for (size_t i = 1; i < cs.ops().size(); ++i) {
      QVERIFY(std::llabs(cs.ops()[i - 1].predicted_ns - cs.ops()[i - 1].measured_ns) >=
              std::llabs(cs.ops()[i].predicted_ns - cs.ops()[i].measured_ns));
    }
    QCOMPARE(cs.ops()[0].predicted_ns, diff.largest[0].predicted_ns);
    QCOMPARE(cs.ops()[0].measured_ns, diff.largest[0].measured_ns);
    // Matched slices carry the error on both sides; partners point at each other.
    const ComparedOp& w = cs.ops()[0];
    QCOMPARE(cs.PartnerOf(w.display_predicted), static_cast<int64_t>(w.display_measured));
    QVERIFY(cs.IsPredicted(w.display_predicted) && !cs.IsPredicted(w.display_measured));
    QCOMPARE(static_cast<double>(cs.ErrorOf(w.display_measured)),
             static_cast<double>(static_cast<float>(w.rel_error)));
    // Measured slices are shifted to the predicted step start.
    auto ix = TimelineIndex::Build(cs.display());
    QCOMPARE(ix->lanes().size(), size_t{4});  // rank 0/1 x predicted/measured
    QCOMPARE(QString::fromStdString(ix->lanes()[1].label), QString("rank 0 measured"));
    int64_t pred0 = INT64_MAX, meas0 = INT64_MAX;
    for (uint32_t i = 0; i < cs.display().slices().size(); ++i) {
      (cs.IsPredicted(i) ? pred0 : meas0) =
          std::min(cs.IsPredicted(i) ? pred0 : meas0, cs.display().slice(i).start_ns);
    }
    QCOMPARE(meas0, pred0);
    cs.SelectStep(0);
    QCOMPARE(cs.selected_step(), int64_t{0});
    QVERIFY(!cs.ops().empty());
  }

  void niceTicks_data() {
    QTest::addColumn<double>("hi");
    QTest::addColumn<int>("max_intervals");
    QTest::addColumn<double>("step");
    QTest::addColumn<double>("last");
    QTest::newRow("80 GiB limit") << 81.6 << 10 << 10.0 << 90.0;
    QTest::newRow("22 s") << 22.0 << 6 << 5.0 << 25.0;
    QTest::newRow("exact multiple") << 20.0 << 6 << 5.0 << 20.0;
    QTest::newRow("small") << 0.0034 << 6 << 0.001 << 0.004;
    QTest::newRow("tokens/s") << 162345.0 << 6 << 50000.0 << 200000.0;
    QTest::newRow("2-step") << 11.0 << 6 << 2.0 << 12.0;
    QTest::newRow("empty") << 0.0 << 6 << 1.0 << 1.0;
  }
  void niceTicks() {
    QFETCH(double, hi);
    QFETCH(int, max_intervals);
    QFETCH(double, step);
    QFETCH(double, last);
    const std::vector<double> t = NiceTicks(hi, max_intervals);
    QVERIFY(t.size() >= 2);
    QCOMPARE(t.front(), 0.0);
    QVERIFY(std::abs(t[1] - step) < step * 1e-9);
    QVERIFY(std::abs(t.back() - last) < step * 1e-9);
    QVERIFY(static_cast<int>(t.size()) - 1 <= max_intervals);
  }
  void scatterLabels() {
    QCOMPARE(ScatterYLabel(0, 25, false), std::string("0 s"));
    QCOMPARE(ScatterYLabel(12.5, 25, false), std::string("12.5 s"));
    QCOMPARE(ScatterYLabel(0.005, 0.02, false), std::string("5 ms"));
    QCOMPARE(ScatterYLabel(150000, 200000, true), std::string("150k"));
    QCOMPARE(FormatCounterValue("memory", "allocated_bytes", 9.0 * (1 << 30)), std::string("9 GiB"));
    QCOMPARE(FormatCounterValue("[memory]", "Total Allocated", 512.0 * (1 << 20)), std::string("512 MiB"));
    QCOMPARE(FormatCounterValue("queue", "depth", 12345), std::string("1.23e+04"));
  }

  void candidates() {
    auto doc = LoadDocument(test::CandidatesFile().toStdString());
    QVERIFY2(doc, doc ? "" : doc.error().message.c_str());
    QCOMPARE(doc->kind, DocumentKind::kCandidates);
    const CandidateSet& set = *doc->candidates;
    QVERIFY(set.candidates.size() > 10);
    size_t evaluated = 0;
    for (const auto& c : set.candidates) evaluated += c.evaluated() ? 1 : 0;
    QVERIFY(evaluated > 0);
    QCOMPARE(DistinctValues(set, Dimension::kTp), (std::vector<int64_t>{1, 2}));
    CandidateFilter f;
    f.required[0] = 2;  // tp = 2
    size_t admitted = 0;
    for (const auto& c : set.candidates) admitted += (c.evaluated() && f.Admits(c)) ? 1 : 0;
    QVERIFY(admitted > 0 && admitted < evaluated);
    // Picking a point at its own pixel finds it (or one drawn on the same pixel).
    const ScatterAxes a = FitScatter(set, {}, false, 800, 600);
    for (size_t i = 0; i < set.candidates.size(); ++i) {
      const Candidate& c = set.candidates[i];
      if (!c.evaluated()) continue;
      const int64_t got = PickCandidate(set, {}, a, a.XOf(c), a.YOf(c), 1);
      QVERIFY(got >= 0);
      QVERIFY(std::fabs(a.XOf(set.candidates[static_cast<size_t>(got)]) - a.XOf(c)) <= 1);
      break;
    }
  }

  void badFilesNameTheFile_data() {
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("expect");
    QTest::newRow("not json") << QByteArray("garbage") << "invalid JSON";
    QTest::newRow("bad phase") << QByteArray(
                                      R"({"traceEvents":[{"ph":"Q","ts":1,"pid":0,"tid":0}]})")
                               << "unknown phase";
    QTest::newRow("unknown kind") << QByteArray(R"({"kind":"model","version":1})") << "/kind";
    QTest::newRow("candidates without list")
        << QByteArray(R"({"kind":"candidates","model":"gpt-tiny"})") << "/cluster";
  }
  void badFilesNameTheFile() {
    QFETCH(QByteArray, content);
    QFETCH(QString, expect);
    const QString path = test::DataDir() + "/bad.json";
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(content);
    f.close();
    auto doc = LoadDocument(path.toStdString());
    QVERIFY(!doc);
    const QString msg = QString::fromStdString(doc.error().message);
    QVERIFY2(msg.contains(path) && msg.contains(expect), qPrintable(msg));
    QCOMPARE(doc.error().kind, ErrorKind::kBadInput);
  }

  void cancelledLoad() {
    LoadProgress pr;
    pr.cancel = true;
    auto doc = LoadDocument(test::KinetoTrace().toStdString(), &pr);
    QVERIFY(!doc);
    QCOMPARE(QString::fromStdString(doc.error().message), QString("cancelled"));
  }
};

QTEST_GUILESS_MAIN(TstGuiCore)
#include "gui_core_test.moc"
