#pragma once
// The viewer's window: Timeline, Compare, Plans and Stats tabs over the documents the core loads.
// Files open from the command line, File > Open, drag and drop and the recent-files menu; a load
// runs on a worker thread with a progress bar and a cancel button. Geometry, the last tab and the
// recent files persist in QSettings.

#include <QMainWindow>
#include <atomic>
#include <memory>
#include <thread>

#include "gui/core/compare_state.h"
#include "gui/core/document.h"
#include "traces/stats.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTabWidget;
class QTableView;
class QTableWidget;
class QMenu;

namespace parallax::gui {

class AggregateModel;
class BreakdownChart;
class CompareOpsModel;
class NameStatsModel;
class ScatterView;
class TimelineView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum Tab { kTimelineTab, kCompareTab, kPlansTab, kStatsTab };
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  //! Synchronous open (command line, screenshots, tests): traces merge into the timeline,
  //! candidates go to the plan explorer. Returns the error (also shown in a dialog when `dialogs`).
  Status OpenNow(const std::string& path);
  Status CompareNow(const std::string& predicted, const std::string& measured);
  //! Loads on the worker thread (the interactive path).
  void OpenAsync(const QString& path);
  void ShowTab(Tab t);
  void SetDialogs(bool on) { dialogs_ = on; }
  void SaveState();

  TimelineView* timeline() const { return timeline_; }
  TimelineView* compare_timeline() const { return compare_timeline_; }
  ScatterView* scatter() const { return scatter_; }
  AggregateModel* aggregate_model() const { return aggregate_model_; }
  CompareOpsModel* compare_model() const { return compare_model_; }
  QTableView* compare_table() const { return compare_table_; }
  QLineEdit* search_edit() const { return search_edit_; }
  QTableWidget* details() const { return details_; }
  const CompareState* compare_state() const { return compare_.get(); }
  const traces::Trace* trace() const { return doc_.trace.get(); }
  bool loading() const { return worker_.joinable(); }

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;
  void closeEvent(QCloseEvent*) override;

 private:
  void BuildUi();
  void BuildMenus();
  void Install(Document doc);
  void ShowError(const QString& message);
  void AddRecent(const QString& path);
  void RefreshRecentMenu();
  void ShowSliceDetails(const TimelineView* view, qint64 slice);
  void UpdateAggregates();
  void RunSearch(int direction);
  void ApplyCompare();
  void FinishAsyncLoad();
  void OnCandidateClicked(qint64 index);
  void RebuildFilters();

  Document doc_;                           // the timeline's document
  std::unique_ptr<CompareState> compare_;  // the comparison
  std::unique_ptr<TimelineIndex> compare_index_;
  std::unique_ptr<traces::TraceStats> stats_;
  std::optional<CandidateSet> candidates_;

  QTabWidget* tabs_ = nullptr;
  TimelineView* timeline_ = nullptr;
  TimelineView* compare_timeline_ = nullptr;
  ScatterView* scatter_ = nullptr;
  BreakdownChart* breakdown_ = nullptr;
  QTableWidget* details_ = nullptr;
  QTableView* aggregate_table_ = nullptr;
  QTableView* compare_table_ = nullptr;
  QTableView* stats_table_ = nullptr;
  AggregateModel* aggregate_model_ = nullptr;
  CompareOpsModel* compare_model_ = nullptr;
  NameStatsModel* stats_model_ = nullptr;
  QLineEdit* search_edit_ = nullptr;
  QLabel* search_label_ = nullptr;
  QLabel* compare_label_ = nullptr;
  QLabel* plans_label_ = nullptr;
  QComboBox* step_combo_ = nullptr;
  QComboBox* color_combo_ = nullptr;
  QComboBox* y_combo_ = nullptr;
  std::vector<QComboBox*> filter_combos_;
  QProgressBar* progress_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  bool dialogs_ = true;

  // Worker-thread load.
  std::thread worker_;
  LoadProgress load_progress_;
  std::unique_ptr<Result<Document>> load_result_;
  QString load_path_;
};

}  // namespace parallax::gui
