// QTest interaction on the real window: zoom (wheel, W/S), pan (drag, A/D), a click selects the
// expected slice, a Shift+drag range gives the expected aggregates, search finds, and the
// comparison selects the worst op in its table and timeline.
#include <QLineEdit>
#include <QMimeData>
#include <QTableView>
#include <QTableWidget>
#include <QtTest>

#include "gui/core/compare_state.h"
#include "gui/models/aggregate_model.h"
#include "gui/models/compare_ops_model.h"
#include "gui/views/main_window.h"
#include "gui/views/scatter_view.h"
#include "gui/views/timeline_view.h"
#include "gui_test_data.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"

using namespace parallax;
using namespace parallax::gui;

class TstGuiInteraction : public QObject {
  Q_OBJECT
 private:
  std::unique_ptr<MainWindow> w_;
  TimelineView* tv_ = nullptr;

  QPoint PointAt(int64_t t_ns, size_t row) const {
    const int x = TimelineView::kLabelWidth +
                  static_cast<int>(std::lround(tv_->axis().ToPx(static_cast<double>(t_ns))));
    return {x, tv_->RowY(row) + TimelineView::kRowHeight / 2};
  }
  size_t Row(size_t lane, size_t i) const { return tv_->index()->lanes()[lane].rows[i]; }

 private slots:
  void initTestCase() {
    const QString path = test::DataDir() + "/known.json";
    QVERIFY(traces::WriteChromeTrace(test::KnownTrace(), path.toStdString()));
    w_ = std::make_unique<MainWindow>();
    w_->SetDialogs(false);
    w_->resize(1200, 800);
    w_->show();
    QVERIFY(QTest::qWaitForWindowExposed(w_.get()));
    QVERIFY(w_->OpenNow(path.toStdString()));
    tv_ = w_->timeline();
    QVERIFY(tv_->index());
  }

  void init() {
    tv_->axis().Fit(0, 4000, tv_->PlotWidth());  // 4 us across the plot
    tv_->SelectSlice(-1);
  }

  void wheelZooms() {
    const double before = tv_->axis().ns_per_px();
    const QPoint p = PointAt(2000, Row(0, 0));
    const double t_at = tv_->axis().ToNs(p.x() - TimelineView::kLabelWidth);
    QWheelEvent in(p, tv_->mapToGlobal(p), {}, QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                   Qt::NoScrollPhase, false);
    QApplication::sendEvent(tv_, &in);
    QVERIFY(tv_->axis().ns_per_px() < before);
    QVERIFY(std::fabs(tv_->axis().ToNs(p.x() - TimelineView::kLabelWidth) - t_at) <
            1e-6);  // cursor time stays
    QTest::keyClick(tv_, Qt::Key_S);
    QTest::keyClick(tv_, Qt::Key_S);
    QVERIFY(tv_->axis().ns_per_px() > before);
    QTest::keyClick(tv_, Qt::Key_W);
    QVERIFY(tv_->axis().ns_per_px() < before * 1.5);
  }

  void dragAndKeysPan() {
    const double start = tv_->axis().start_ns();
    const double npp = tv_->axis().ns_per_px();
    const QPoint a = PointAt(2000, Row(0, 0));
    QTest::mousePress(tv_, Qt::LeftButton, {}, a);
    QTest::mouseMove(tv_, a + QPoint(50, 0));
    QTest::mouseMove(tv_, a + QPoint(100, 0));
    QTest::mouseRelease(tv_, Qt::LeftButton, {}, a + QPoint(100, 0));
    QCOMPARE(tv_->axis().start_ns(), start - 100 * npp);
    QCOMPARE(tv_->selected_slice(), qint64(-1));  // a drag is no click
    const double s2 = tv_->axis().start_ns();
    QTest::keyClick(tv_, Qt::Key_D);
    QVERIFY(tv_->axis().start_ns() > s2);
    QTest::keyClick(tv_, Qt::Key_A);
    QCOMPARE(tv_->axis().start_ns(), s2);
  }

  void clickSelectsSlice_data() {
    QTest::addColumn<int>("lane");
    QTest::addColumn<int>("row");
    QTest::addColumn<qlonglong>("t");
    QTest::addColumn<QString>("name");
    QTest::addColumn<qlonglong>("start");
    QTest::newRow("gemm 3 of rank 0") << 0 << 0 << 1650LL << "gemm" << 1600LL;
    QTest::newRow("nested inner of rank 0") << 0 << 1 << 1230LL << "inner" << 1210LL;
    QTest::newRow("allreduce 2 of rank 1") << 1 << 2 << 2100LL << "allreduce" << 2000LL;
  }
  void clickSelectsSlice() {
    QFETCH(int, lane);
    QFETCH(int, row);
    QFETCH(qlonglong, t);
    QFETCH(QString, name);
    QFETCH(qlonglong, start);
    QSignalSpy spy(tv_, &TimelineView::sliceSelected);
    QTest::mouseClick(tv_, Qt::LeftButton, {},
                      PointAt(t, Row(static_cast<size_t>(lane), static_cast<size_t>(row))));
    QCOMPARE(spy.count(), 1);
    const int64_t s = tv_->selected_slice();
    QVERIFY(s >= 0);
    const traces::Slice& sl = w_->trace()->slice(static_cast<size_t>(s));
    QCOMPARE(QString::fromUtf8(w_->trace()->Str(sl.name).data()).left(name.size()), name);
    QCOMPARE(sl.start_ns, static_cast<int64_t>(start));
    QCOMPARE(w_->trace()->track(sl.track).rank, static_cast<int64_t>(lane));
    // The details panel names it.
    QCOMPARE(w_->details()->item(0, 1)->text(), name);
  }

  void clickOnEmptySpaceClears() {
    QTest::mouseClick(tv_, Qt::LeftButton, {}, PointAt(1650, Row(0, 0)));
    QVERIFY(tv_->selected_slice() >= 0);
    QTest::mouseClick(tv_, Qt::LeftButton, {}, PointAt(3500, Row(0, 0)));
    QCOMPARE(tv_->selected_slice(), qint64(-1));
  }

  void rangeSelectionAggregates() {
    // Shift+drag over rank 0's three rows from 1000 ns to 1950 ns.
    const QPoint a = PointAt(1000, Row(0, 0)) - QPoint(0, 5);
    const QPoint b = PointAt(1950, Row(0, 2));
    QTest::mousePress(tv_, Qt::LeftButton, Qt::ShiftModifier, a);
    QTest::mouseMove(tv_, (a + b) / 2);
    QTest::mouseMove(tv_, b);
    QTest::mouseRelease(tv_, Qt::LeftButton, Qt::ShiftModifier, b);
    QVERIFY(tv_->selected_range());
    QCOMPARE(tv_->range_rows().size(), size_t{3});
    const AggregateModel* m = w_->aggregate_model();
    QCOMPARE(m->rowCount(), 3);
    std::map<std::string, NameAggregate> got;
    for (const auto& r : m->rows()) got[r.name] = r;
    QCOMPARE(got["gemm"].count, int64_t{5});
    QCOMPARE(got["gemm"].total_ns, int64_t{500});
    QCOMPARE(got["inner"].count, int64_t{5});
    QCOMPARE(got["allreduce"].count, int64_t{2});
    QCOMPARE(got["allreduce"].p99_ns, int64_t{300});
    // Z zooms to the range.
    QTest::keyClick(tv_, Qt::Key_Z);
    QVERIFY(std::fabs(tv_->axis().ToNs(0) - static_cast<double>(tv_->selected_range()->first)) < 1);
  }

  void searchFindsAndSteps() {
    QLineEdit* e = w_->search_edit();
    e->setText("allred");
    QTest::keyClick(e, Qt::Key_Return);
    int64_t s = tv_->selected_slice();
    QVERIFY(s >= 0);
    QCOMPARE(w_->trace()->Str(w_->trace()->slice(static_cast<size_t>(s)).name),
             std::string_view("allreduce"));
    QCOMPARE(tv_->search().matches().size(), size_t{8});
    const int64_t first_start = w_->trace()->slice(static_cast<size_t>(s)).start_ns;
    QTest::keyClick(e, Qt::Key_Return);
    const int64_t s2 = tv_->selected_slice();
    QVERIFY(w_->trace()->slice(static_cast<size_t>(s2)).start_ns >= first_start);
    QVERIFY(s2 != s);
    e->setText("");
    QTest::keyClick(e, Qt::Key_Return);
    QVERIFY(!tv_->search().active());
  }

  void compareSelectsWorstOp() {
    const QString meas = test::MeasuredTrace();
    if (meas.isEmpty()) QSKIP("no MPI: parallax run cannot make a measured trace");
    QVERIFY(w_->CompareNow(test::SimulatedTrace().toStdString(), meas.toStdString()));
    const CompareState* cs = w_->compare_state();
    QVERIFY(cs && !cs->ops().empty());
    QCOMPARE(w_->compare_table()->currentIndex().row(), 0);
    QCOMPARE(w_->compare_timeline()->selected_slice(),
             static_cast<qint64>(cs->ops()[0].display_predicted));
    QCOMPARE(w_->compare_timeline()->partner_slice(),
             static_cast<qint64>(cs->ops()[0].display_measured));
    // Clicking another row selects that op in the timeline.
    const QModelIndex row3 = w_->compare_model()->index(3, 0);
    w_->compare_table()->setCurrentIndex(row3);
    QCOMPARE(w_->compare_timeline()->selected_slice(),
             static_cast<qint64>(cs->ops()[3].display_predicted));
  }

  void badFileKeepsRunning() {
    const QString bad = test::DataDir() + "/bad.json";
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write("{\"traceEvents\": [");
    f.close();
    const traces::Trace* before = w_->trace();
    Status st = w_->OpenNow(bad.toStdString());
    QVERIFY(!st);
    QVERIFY(QString::fromStdString(st.error().message).contains(bad));
    QCOMPARE(w_->trace(), before);  // the open trace stays
  }

  void dropOpensFile() {
    const size_t before = w_->trace()->slices().size();
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(test::DataDir() + "/known.json")});
    QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(w_.get(), &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(w_.get(), &drop);
    QTRY_COMPARE_WITH_TIMEOUT(w_->trace()->slices().size(), 2 * before,
                              20000);  // joins the open trace
    QTRY_VERIFY(!w_->loading());
  }

  void asyncLoadWithProgress() {
    // A further trace joins the open one (one file per rank).
    const size_t before = w_->trace()->slices().size();
    auto kineto = traces::ReadChromeTrace(test::KinetoTrace().toStdString());
    QVERIFY(kineto);
    w_->OpenAsync(test::KinetoTrace());
    QVERIFY(w_->loading());
    QTRY_VERIFY_WITH_TIMEOUT(w_->trace()->slices().size() == before + kineto->slices().size(),
                             60000);
    QVERIFY(!w_->loading());
  }

  void plansClickSimulatesPoint() {
    QVERIFY(w_->OpenNow(test::CandidatesFile().toStdString()));
    ScatterView* sv = w_->scatter();
    QTRY_VERIFY(sv->isVisible());
    const CandidateSet* set = sv->candidates();
    QVERIFY(set);
    // The fastest evaluated layout: click its point.
    int64_t best = -1;
    for (size_t i = 0; i < set->candidates.size(); ++i) {
      const Candidate& c = set->candidates[i];
      if (c.evaluated() &&
          (best < 0 || c.step_time_s < set->candidates[static_cast<size_t>(best)].step_time_s)) {
        best = static_cast<int64_t>(i);
      }
    }
    QVERIFY(best >= 0);
    const Candidate& c = set->candidates[static_cast<size_t>(best)];
    const QPoint at(static_cast<int>(std::lround(sv->axes().XOf(c))),
                    static_cast<int>(std::lround(sv->axes().YOf(c))));
    QSignalSpy spy(sv, &ScatterView::candidateClicked);
    QTest::mouseClick(sv, Qt::LeftButton, {}, at);
    QCOMPARE(spy.count(), 1);
    // Its predicted timeline opens: one lane per rank of the clicked layout.
    QVERIFY(w_->trace());
    QCOMPARE(w_->trace()->metadata.kind, std::string("predicted"));
    QCOMPARE(static_cast<int64_t>(w_->timeline()->index()->lanes().size()), c.layout.world_size());
  }
};

QTEST_MAIN(TstGuiInteraction)
#include "gui_interaction_test.moc"
