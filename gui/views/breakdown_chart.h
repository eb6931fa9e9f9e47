#pragma once
// Stats view chart: per rank a horizontal bar of compute, exposed communication (not overlapped
// by compute), other device work and idle time (traces::RankBreakdown).

#include <QWidget>
#include <vector>

#include "traces/stats.h"

namespace parallax::gui {

class BreakdownChart : public QWidget {
  Q_OBJECT
 public:
  explicit BreakdownChart(QWidget* parent = nullptr);
  void SetBreakdown(std::vector<traces::RankBreakdown> ranks);
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  std::vector<traces::RankBreakdown> ranks_;
};

}  // namespace parallax::gui
