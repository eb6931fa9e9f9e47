// Every QAbstractItemModel of the GUI under QAbstractItemModelTester (fatal mode), filled from
// real data, plus their contents and sorting.
#include <QAbstractItemModelTester>
#include <QtTest>

#include "gui/core/compare_state.h"
#include "gui/core/selection.h"
#include "gui/core/timeline_index.h"
#include "gui/models/aggregate_model.h"
#include "gui/models/compare_ops_model.h"
#include "gui/models/name_stats_model.h"
#include "gui_test_data.h"
#include "traces/chrome_reader.h"
#include "traces/stats.h"

using namespace parallax;
using namespace parallax::gui;

class TstGuiModels : public QObject {
  Q_OBJECT
 private slots:
  void aggregateModel_data() {
    QTest::addColumn<int>("column");
    QTest::addColumn<int>("order");
    QTest::addColumn<QString>("first");
    QTest::newRow("total desc") << int(AggregateModel::kTotal) << int(Qt::DescendingOrder)
                                << "allreduce";
    QTest::newRow("name asc") << int(AggregateModel::kName) << int(Qt::AscendingOrder)
                              << "allreduce";
    QTest::newRow("name desc") << int(AggregateModel::kName) << int(Qt::DescendingOrder) << "inner";
    QTest::newRow("mean asc") << int(AggregateModel::kMean) << int(Qt::AscendingOrder) << "inner";
    QTest::newRow("count desc") << int(AggregateModel::kCount) << int(Qt::DescendingOrder)
                                << "gemm";
  }
  void aggregateModel() {
    QFETCH(int, column);
    QFETCH(int, order);
    QFETCH(QString, first);
    const traces::Trace t = test::KnownTrace();
    auto ix = TimelineIndex::Build(t);
    AggregateModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.SetRows(AggregateRange(t, *ix, ix->lanes()[0].rows, 0, 100000));
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.columnCount(), int(AggregateModel::kColumns));
    QPersistentModelIndex kept = model.index(0, 0);
    const QString kept_name = kept.data().toString();
    model.sort(column, static_cast<Qt::SortOrder>(order));
    QCOMPARE(model.index(0, AggregateModel::kName).data().toString(), first);
    QCOMPARE(kept.data().toString(), kept_name);  // persistent indexes follow their row
    const int gemm_row = model.match(model.index(0, 0), Qt::DisplayRole, "gemm").value(0).row();
    QCOMPARE(model.index(gemm_row, AggregateModel::kCount).data().toLongLong(), 10LL);
    QCOMPARE(
        model.index(gemm_row, AggregateModel::kTotal).data(AggregateModel::kSortRole).toLongLong(),
        1000LL);
    QCOMPARE(model.index(gemm_row, AggregateModel::kTotal).data().toString(), QString("1 us"));
    model.SetRows({});
    QCOMPARE(model.rowCount(), 0);
  }

  void nameStatsModel() {
    auto t = traces::ReadChromeTrace(test::KinetoTrace().toStdString());
    QVERIFY(t);
    const auto stats = traces::ComputeStats(*t, {.top_names = 50});
    NameStatsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.SetStats(stats.names);
    QCOMPARE(model.rowCount(), 50);
    QCOMPARE(model.index(0, NameStatsModel::kName).data().toString(),
             QString::fromStdString(stats.names[0].name));
    QCOMPARE(model.index(3, NameStatsModel::kCount).data().toLongLong(),
             static_cast<qlonglong>(stats.names[3].count));
    QCOMPARE(model.headerData(NameStatsModel::kP99, Qt::Horizontal).toString(), QString("p99"));
  }

  void compareOpsModel() {
    const QString meas = test::MeasuredTrace();
    if (meas.isEmpty()) QSKIP("no MPI: parallax run cannot make a measured trace");
    auto p = traces::ReadChromeTrace(test::SimulatedTrace().toStdString());
    auto m = traces::ReadChromeTrace(meas.toStdString());
    QVERIFY(p && m);
    CompareState cs(std::move(*p), std::move(*m));
    CompareOpsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.SetState(&cs);
    QCOMPARE(model.rowCount(), static_cast<int>(cs.ops().size()));
    QCOMPARE(model.index(0, CompareOpsModel::kOp).data().toString(),
             QString::fromStdString(cs.ops()[0].what));
    QVERIFY(model.index(0, CompareOpsModel::kError).data().toString().endsWith('%'));
    QVERIFY(model.index(0, CompareOpsModel::kError).data(Qt::BackgroundRole).isValid());
    cs.SelectStep(0);
    model.SetState(&cs);
    QCOMPARE(model.rowCount(), static_cast<int>(cs.ops().size()));
    model.SetState(nullptr);
    QCOMPARE(model.rowCount(), 0);
  }
};

QTEST_GUILESS_MAIN(TstGuiModels)
#include "gui_models_test.moc"
