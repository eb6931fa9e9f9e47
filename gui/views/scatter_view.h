#pragma once
// The plan explorer's scatter: predicted step time (or tokens/s) against peak memory per GPU,
// the device memory limit as a dashed line, points coloured by one layout dimension, a tooltip
// per point; a click emits the candidate (the window simulates it).

#include <QWidget>

#include "gui/core/candidates.h"

namespace parallax::gui {

class ScatterView : public QWidget {
  Q_OBJECT
 public:
  explicit ScatterView(QWidget* parent = nullptr);
  void SetCandidates(const CandidateSet* set);  //!< not owned
  const CandidateSet* candidates() const { return set_; }
  void SetColorBy(Dimension d);
  void SetFilter(const CandidateFilter& f);
  void SetTokensPerSecond(bool on);
  const ScatterAxes& axes() const { return axes_; }
  const CandidateFilter& filter() const { return filter_; }
  int64_t PickAt(QPointF p) const;
  void Paint(QPainter& p, QSize size) const;

 signals:
  void candidateClicked(qint64 index);

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  bool event(QEvent*) override;

 private:
  void Refit();
  const CandidateSet* set_ = nullptr;
  Dimension color_by_ = Dimension::kTp;
  CandidateFilter filter_;
  bool tokens_per_s_ = false;
  ScatterAxes axes_;
};

//! The point colour of the i-th distinct value.
QRgb CategoryColor(size_t i);

}  // namespace parallax::gui
