#include "gui/views/main_window.h"

#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include "gui/core/palette.h"
#include "gui/models/aggregate_model.h"
#include "gui/models/compare_ops_model.h"
#include "gui/models/name_stats_model.h"
#include "gui/views/breakdown_chart.h"
#include "gui/views/scatter_view.h"
#include "gui/views/timeline_view.h"
#include "traces/chrome_reader.h"

namespace parallax::gui {
namespace {

constexpr int kMaxRecent = 10;

QTableView* MakeTable(QAbstractItemModel* model, QWidget* parent, bool sortable) {
  auto* t = new QTableView(parent);
  t->setModel(model);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setSelectionMode(QAbstractItemView::SingleSelection);
  t->verticalHeader()->setVisible(false);
  t->verticalHeader()->setDefaultSectionSize(20);
  t->horizontalHeader()->setStretchLastSection(true);
  t->setSortingEnabled(sortable);
  return t;
}

//! Fits a table's name column to its contents, at most 420 px (kernel names run to 1,000 chars).
void FitNameColumn(QTableView* t) {
  t->resizeColumnToContents(0);
  if (t->columnWidth(0) > 420) t->setColumnWidth(0, 420);
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle("parallax-gui");
  setAcceptDrops(true);
  BuildUi();
  BuildMenus();
  QSettings s;
  if (s.contains("window/geometry")) restoreGeometry(s.value("window/geometry").toByteArray());
  tabs_->setCurrentIndex(s.value("window/tab", 0).toInt());
}

MainWindow::~MainWindow() {
  load_progress_.cancel = true;
  if (worker_.joinable()) worker_.join();
}

void MainWindow::BuildUi() {
  tabs_ = new QTabWidget(this);
  setCentralWidget(tabs_);

  // Timeline: search bar, timeline, details + range aggregates.
  auto* tl_page = new QWidget;
  auto* tl_layout = new QVBoxLayout(tl_page);
  tl_layout->setContentsMargins(4, 4, 4, 4);
  auto* bar = new QHBoxLayout;
  search_edit_ = new QLineEdit;
  search_edit_->setPlaceholderText("search slices by name (regular expression), Enter: next");
  auto* prev = new QPushButton("Previous");
  auto* next = new QPushButton("Next");
  search_label_ = new QLabel;
  bar->addWidget(search_edit_, 1);
  bar->addWidget(prev);
  bar->addWidget(next);
  bar->addWidget(search_label_);
  tl_layout->addLayout(bar);
  auto* split = new QSplitter(Qt::Vertical);
  timeline_ = new TimelineView;
  split->addWidget(timeline_);
  auto* bottom = new QSplitter(Qt::Horizontal);
  details_ = new QTableWidget(0, 2);
  details_->setHorizontalHeaderLabels({"", "selected slice"});
  details_->verticalHeader()->setVisible(false);
  details_->horizontalHeader()->setStretchLastSection(true);
  details_->verticalHeader()->setDefaultSectionSize(19);
  aggregate_model_ = new AggregateModel(this);
  aggregate_table_ = MakeTable(aggregate_model_, this, true);
  bottom->addWidget(details_);
  bottom->addWidget(aggregate_table_);
  bottom->setSizes({320, 600});
  split->addWidget(bottom);
  split->setStretchFactor(0, 4);
  split->setStretchFactor(1, 1);
  tl_layout->addWidget(split, 1);
  tabs_->addTab(tl_page, "Timeline");
  connect(search_edit_, &QLineEdit::returnPressed, this, [this] { RunSearch(+1); });
  connect(next, &QPushButton::clicked, this, [this] { RunSearch(+1); });
  connect(prev, &QPushButton::clicked, this, [this] { RunSearch(-1); });
  connect(timeline_, &TimelineView::sliceSelected, this,
          [this](qint64 s) { ShowSliceDetails(timeline_, s); });
  connect(timeline_, &TimelineView::rangeSelected, this, [this] { UpdateAggregates(); });

  // Compare: step selector + summary, timeline coloured by error, op table.
  auto* cmp_page = new QWidget;
  auto* cmp_layout = new QVBoxLayout(cmp_page);
  cmp_layout->setContentsMargins(4, 4, 4, 4);
  auto* cmp_bar = new QHBoxLayout;
  step_combo_ = new QComboBox;
  compare_label_ = new QLabel("File > Compare... or parallax-gui --compare PREDICTED MEASURED");
  cmp_bar->addWidget(new QLabel("measured step"));
  cmp_bar->addWidget(step_combo_);
  cmp_bar->addWidget(compare_label_, 1);
  cmp_layout->addLayout(cmp_bar);
  auto* cmp_split = new QSplitter(Qt::Vertical);
  compare_timeline_ = new TimelineView;
  compare_model_ = new CompareOpsModel(this);
  compare_table_ = MakeTable(compare_model_, this, false);
  cmp_split->addWidget(compare_timeline_);
  cmp_split->addWidget(compare_table_);
  cmp_split->setStretchFactor(0, 3);
  cmp_split->setStretchFactor(1, 2);
  cmp_layout->addWidget(cmp_split, 1);
  tabs_->addTab(cmp_page, "Compare");
  connect(step_combo_, &QComboBox::activated, this, [this](int i) {
    if (!compare_) return;
    compare_->SelectStep(step_combo_->itemData(i).toLongLong());
    ApplyCompare();
  });
  connect(compare_table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& cur) {
            if (const ComparedOp* op = compare_model_->OpAt(cur.row())) {
              compare_timeline_->SetPartner(op->display_measured);
              compare_timeline_->SelectSlice(op->display_predicted, true);
              ShowSliceDetails(compare_timeline_, op->display_predicted);
            }
          });
  connect(compare_timeline_, &TimelineView::sliceSelected, this, [this](qint64 s) {
    if (s >= 0)
      compare_label_->setText(
          compare_label_->text().section("  |", 0, 0) + "  |  " +
          QString::fromStdString(
              DescribeSlice(*compare_timeline_->trace(), static_cast<uint32_t>(s), 0)[0].second));
  });

  // Plans: axis, colour and filter controls over the scatter.
  auto* plans_page = new QWidget;
  auto* plans_layout = new QVBoxLayout(plans_page);
  plans_layout->setContentsMargins(4, 4, 4, 4);
  auto* controls = new QHBoxLayout;
  y_combo_ = new QComboBox;
  y_combo_->addItems({"step time", "tokens/s"});
  color_combo_ = new QComboBox;
  for (Dimension d : kAllDimensions) color_combo_->addItem(ToString(d));
  controls->addWidget(new QLabel("y:"));
  controls->addWidget(y_combo_);
  controls->addWidget(new QLabel("colour by:"));
  controls->addWidget(color_combo_);
  controls->addStretch(1);
  plans_layout->addLayout(controls);
  // Filters in rows of five (one row of all nine made the window at least 1,360 px wide).
  auto* filters = new QGridLayout;
  filters->addWidget(new QLabel("filters:"), 0, 0);
  constexpr int kPerRow = 5;
  for (Dimension d : kAllDimensions) {
    auto* c = new QComboBox;
    c->setToolTip(QString("filter: ") + ToString(d));
    const int k = static_cast<int>(filter_combos_.size());
    filter_combos_.push_back(c);
    filters->addWidget(new QLabel(QString(ToString(d)) + ":"), k / kPerRow, 1 + 2 * (k % kPerRow),
                       Qt::AlignRight);
    filters->addWidget(c, k / kPerRow, 2 + 2 * (k % kPerRow));
    connect(c, &QComboBox::activated, this, [this] {
      CandidateFilter f;
      for (size_t i = 0; i < filter_combos_.size(); ++i) {
        const QVariant v = filter_combos_[i]->currentData();
        if (v.isValid()) f.required[i] = v.toLongLong();
      }
      scatter_->SetFilter(f);
    });
  }
  filters->setColumnStretch(2 * kPerRow + 1, 1);
  plans_layout->addLayout(filters);
  scatter_ = new ScatterView;
  plans_layout->addWidget(scatter_, 1);
  plans_label_ = new QLabel("Click a point to simulate it and open its predicted timeline.");
  plans_layout->addWidget(plans_label_);
  tabs_->addTab(plans_page, "Plans");
  connect(y_combo_, &QComboBox::activated, this,
          [this](int i) { scatter_->SetTokensPerSecond(i == 1); });
  connect(color_combo_, &QComboBox::activated, this,
          [this](int i) { scatter_->SetColorBy(kAllDimensions[i]); });
  connect(scatter_, &ScatterView::candidateClicked, this, &MainWindow::OnCandidateClicked);

  // Stats: per-rank breakdown + per-name table.
  auto* stats_page = new QWidget;
  auto* stats_layout = new QVBoxLayout(stats_page);
  stats_layout->setContentsMargins(4, 4, 4, 4);
  breakdown_ = new BreakdownChart;
  stats_model_ = new NameStatsModel(this);
  stats_table_ = MakeTable(stats_model_, this, false);
  stats_layout->addWidget(breakdown_);
  stats_layout->addWidget(stats_table_, 1);
  tabs_->addTab(stats_page, "Stats");

  // Status bar: load progress + cancel.
  progress_ = new QProgressBar;
  progress_->setRange(0, 1000);
  progress_->setMaximumWidth(240);
  progress_->hide();
  cancel_ = new QPushButton("Cancel");
  cancel_->hide();
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);
  connect(cancel_, &QPushButton::clicked, this, [this] { load_progress_.cancel = true; });
}

void MainWindow::BuildMenus() {
  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("&Open...", QKeySequence::Open, this, [this] {
    const QString p =
        QFileDialog::getOpenFileName(this, "Open trace, plan or candidates", {},
                                     "parallax files (*.json *.json.gz *.gz);;All files (*)");
    if (!p.isEmpty()) OpenAsync(p);
  });
  file->addAction("&Compare...", this, [this] {
    const QString pred = QFileDialog::getOpenFileName(this, "Predicted trace");
    if (pred.isEmpty()) return;
    const QString meas = QFileDialog::getOpenFileName(this, "Measured trace");
    if (meas.isEmpty()) return;
    if (Status st = CompareNow(pred.toStdString(), meas.toStdString()); st) ShowTab(kCompareTab);
  });
  recent_menu_ = file->addMenu("Open &Recent");
  RefreshRecentMenu();
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
  QMenu* view = menuBar()->addMenu("&View");
  view->addAction("Fit all (F)", this, [this] { timeline_->FitAll(); });
  view->addAction("Zoom to selection (Z)", this, [this] { timeline_->ZoomToSelection(); });
}

void MainWindow::ShowTab(Tab t) { tabs_->setCurrentIndex(static_cast<int>(t)); }

void MainWindow::ShowError(const QString& message) {
  statusBar()->showMessage(message, 10000);
  if (dialogs_) QMessageBox::critical(this, "parallax-gui", message);
}

void MainWindow::AddRecent(const QString& path) {
  QSettings s;
  QStringList list = s.value("recent_files").toStringList();
  const QString abs = QFileInfo(path).absoluteFilePath();
  list.removeAll(abs);
  list.prepend(abs);
  while (list.size() > kMaxRecent) list.removeLast();
  s.setValue("recent_files", list);
  RefreshRecentMenu();
}

void MainWindow::RefreshRecentMenu() {
  recent_menu_->clear();
  const QStringList list = QSettings().value("recent_files").toStringList();
  for (const QString& p : list) recent_menu_->addAction(p, this, [this, p] { OpenAsync(p); });
  recent_menu_->setEnabled(!list.isEmpty());
}

Status MainWindow::OpenNow(const std::string& path) {
  auto doc = LoadDocument(path);
  if (!doc) {
    ShowError(QString::fromStdString(doc.error().message));
    return doc.error();
  }
  AddRecent(QString::fromStdString(path));
  Install(std::move(*doc));
  return {};
}

void MainWindow::OpenAsync(const QString& path) {
  if (worker_.joinable()) {
    ShowError("a file is still loading: " + load_path_);
    return;
  }
  load_path_ = path;
  load_progress_.fraction = 0;
  load_progress_.cancel = false;
  progress_->setValue(0);
  progress_->show();
  cancel_->show();
  statusBar()->showMessage("loading " + path);
  const std::string p = path.toStdString();
  worker_ = std::thread([this, p] {
    auto r = std::make_unique<Result<Document>>(LoadDocument(p, &load_progress_));
    QMetaObject::invokeMethod(
        this,
        [this, r = r.release()]() mutable {
          load_result_.reset(r);
          FinishAsyncLoad();
        },
        Qt::QueuedConnection);
  });
  auto* timer = new QTimer(this);
  connect(timer, &QTimer::timeout, this, [this, timer] {
    if (!worker_.joinable()) {
      timer->deleteLater();
      return;
    }
    progress_->setValue(static_cast<int>(load_progress_.fraction.load() * 1000));
  });
  timer->start(50);
}

void MainWindow::FinishAsyncLoad() {
  if (worker_.joinable()) worker_.join();
  progress_->hide();
  cancel_->hide();
  auto r = std::move(load_result_);
  if (!r || !*r) {
    const QString msg = r ? QString::fromStdString(r->error().message) : QString("load failed");
    if (msg == "cancelled")
      statusBar()->showMessage("cancelled loading " + load_path_, 5000);
    else
      ShowError(msg);
    return;
  }
  AddRecent(load_path_);
  statusBar()->showMessage("opened " + load_path_, 5000);
  Install(std::move(r->value()));
}

void MainWindow::Install(Document doc) {
  if (doc.kind == DocumentKind::kCandidates) {
    candidates_ = std::move(doc.candidates);
    scatter_->SetCandidates(&*candidates_);
    RebuildFilters();
    int evaluated = 0;
    for (const auto& c : candidates_->candidates) evaluated += c.evaluated() ? 1 : 0;
    plans_label_->setText(
        QString("%1: %2 layouts, %3 evaluated, the rest rejected; %4 on %5. Click a point to "
                "simulate it.")
            .arg(QString::fromStdString(doc.path))
            .arg(candidates_->candidates.size())
            .arg(evaluated)
            .arg(QString::fromStdString(candidates_->model.name))
            .arg(QString::fromStdString(candidates_->cluster.name)));
    ShowTab(kPlansTab);
    return;
  }
  if (doc_.trace && doc.kind == DocumentKind::kTrace && doc_.kind == DocumentKind::kTrace) {
    // A further trace joins the open one (e.g. one Kineto file per rank).
    doc_.trace->Merge(*doc.trace);
    doc_.index = std::make_unique<TimelineIndex>(*TimelineIndex::Build(*doc_.trace));
    doc_.path += ", " + doc.path;
  } else {
    doc_ = std::move(doc);
  }
  setWindowTitle(QString::fromStdString("parallax-gui - " + doc_.path));
  timeline_->SetTrace(doc_.trace.get(), doc_.index.get());
  stats_ =
      std::make_unique<traces::TraceStats>(traces::ComputeStats(*doc_.trace, {.top_names = 500}));
  breakdown_->SetBreakdown(stats_->per_rank);
  stats_model_->SetStats(stats_->names);
  FitNameColumn(stats_table_);
  aggregate_model_->SetRows({});
  details_->setRowCount(0);
  ShowTab(kTimelineTab);
}

Status MainWindow::CompareNow(const std::string& predicted, const std::string& measured) {
  auto p = LoadDocument(predicted);
  if (!p) return ShowError(QString::fromStdString(p.error().message)), Status(p.error());
  auto m = LoadDocument(measured);
  if (!m) return ShowError(QString::fromStdString(m.error().message)), Status(m.error());
  if (!p->trace || !m->trace) {
    Error e =
        BadInput((p->trace ? measured : predicted) + ": not a trace (compare needs two traces)");
    ShowError(QString::fromStdString(e.message));
    return e;
  }
  compare_ = std::make_unique<CompareState>(std::move(*p->trace), std::move(*m->trace));
  step_combo_->clear();
  step_combo_->addItem("auto", qlonglong(-1));
  for (int64_t s : compare_->steps()) step_combo_->addItem(QString::number(s), qlonglong(s));
  ApplyCompare();
  return {};
}

void MainWindow::ApplyCompare() {
  compare_index_ = std::make_unique<TimelineIndex>(*TimelineIndex::Build(compare_->display()));
  compare_timeline_->SetTrace(&compare_->display(), compare_index_.get());
  const CompareState* st = compare_.get();
  const std::vector<Rgb> names = ColorTable(st->display());
  compare_timeline_->SetStyle([st](uint32_t s) {
    const float e = st->ErrorOf(s);
    if (std::isnan(e)) return TimelineView::SliceStyle{0xffc8c8cc, true};
    return TimelineView::SliceStyle{ErrorColor(e), false};
  });
  compare_model_->SetState(st);
  FitNameColumn(compare_table_);
  compare_label_->setText(
      QString("%1 alignment, %2 matched ops, %3 only predicted, %4 only measured; colour: "
              "blue predicted shorter, red predicted longer, hatched unmatched")
          .arg(ToString(st->mode()))
          .arg(st->ops().size())
          .arg(st->only_predicted())
          .arg(st->only_measured()));
  if (!st->ops().empty()) compare_table_->selectRow(0);  // the worst op
}

void MainWindow::ShowSliceDetails(const TimelineView* view, qint64 slice) {
  details_->setRowCount(0);
  if (slice < 0 || !view->trace()) return;
  auto lines =
      DescribeSlice(*view->trace(), static_cast<uint32_t>(slice), view->index()->first_ns());
  if (view == compare_timeline_ && compare_) {
    const float e = compare_->ErrorOf(static_cast<uint32_t>(slice));
    lines.emplace_back(
        "side", compare_->IsPredicted(static_cast<uint32_t>(slice)) ? "predicted" : "measured");
    lines.emplace_back(
        "error", std::isnan(e) ? "unmatched" : QString::asprintf("%+.1f%%", e * 100).toStdString());
  }
  details_->setRowCount(static_cast<int>(lines.size()));
  for (size_t i = 0; i < lines.size(); ++i) {
    details_->setItem(static_cast<int>(i), 0,
                      new QTableWidgetItem(QString::fromStdString(lines[i].first)));
    details_->setItem(static_cast<int>(i), 1,
                      new QTableWidgetItem(QString::fromStdString(lines[i].second)));
  }
  details_->resizeColumnToContents(0);
}

void MainWindow::UpdateAggregates() {
  const auto range = timeline_->selected_range();
  if (!range || !doc_.trace) return;
  aggregate_model_->SetRows(AggregateRange(*doc_.trace, *doc_.index, timeline_->range_rows(),
                                           range->first, range->second));
  FitNameColumn(aggregate_table_);
}

void MainWindow::RunSearch(int direction) {
  if (!doc_.trace) return;
  SliceSearch& s = timeline_->search();
  const std::string pattern = search_edit_->text().toStdString();
  if (pattern.empty()) {
    s.Clear();
    search_label_->clear();
    timeline_->update();
    return;
  }
  static std::string last;
  if (!s.active() || last != pattern) {
    last = pattern;
    if (std::string err = s.Set(*doc_.trace, pattern); !err.empty()) {
      search_label_->setText(QString::fromStdString(err));
      return;
    }
  }
  int64_t from = timeline_->selected_slice() >= 0
                     ? doc_.trace->slice(static_cast<size_t>(timeline_->selected_slice())).start_ns
                     : static_cast<int64_t>(timeline_->axis().ToNs(0)) - 1;
  const int64_t hit = direction > 0 ? s.Next(*doc_.trace, from) : s.Previous(*doc_.trace, from);
  search_label_->setText(QString("%1 matches").arg(s.matches().size()));
  if (hit >= 0) {
    timeline_->SelectSlice(hit, true);
  } else {
    timeline_->update();
  }
}

void MainWindow::RebuildFilters() {
  for (size_t i = 0; i < filter_combos_.size(); ++i) {
    QComboBox* c = filter_combos_[i];
    c->clear();
    c->addItem("all");
    for (int64_t v : DistinctValues(*candidates_, kAllDimensions[i])) {
      c->addItem(QString::fromStdString(ValueLabel(kAllDimensions[i], v)), qlonglong(v));
    }
  }
}

void MainWindow::OnCandidateClicked(qint64 index) {
  if (!candidates_) return;
  const Candidate& c = candidates_->candidates[static_cast<size_t>(index)];
  Plan plan;
  plan.model = candidates_->model;
  plan.cluster = candidates_->cluster;
  plan.training = candidates_->training;
  plan.layout = c.layout;
  plan.training.global_batch = c.layout.global_batch;
  auto trace = SimulatePlan(plan);
  if (!trace) {
    ShowError(QString::fromStdString(trace.error().message));
    return;
  }
  Document d = DocumentFromTrace(std::move(*trace), "simulated " + LayoutToString(c.layout));
  d.kind = DocumentKind::kPlan;
  d.plan = plan;
  Install(std::move(d));
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  for (const QUrl& u : e->mimeData()->urls()) {
    if (u.isLocalFile()) {
      OpenAsync(u.toLocalFile());
      break;  // one load at a time
    }
  }
}

void MainWindow::SaveState() {
  QSettings s;
  s.setValue("window/geometry", saveGeometry());
  s.setValue("window/tab", tabs_->currentIndex());
}

void MainWindow::closeEvent(QCloseEvent* e) {
  SaveState();
  e->accept();
}

}  // namespace parallax::gui
