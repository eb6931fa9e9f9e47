#include "gui/views/scatter_view.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "gui/core/time_axis.h"

namespace parallax::gui {

QRgb CategoryColor(size_t i) {
  static const QRgb kColors[] = {0xff1f77b4, 0xffff7f0e, 0xff2ca02c, 0xffd62728, 0xff9467bd,
                                 0xff8c564b, 0xffe377c2, 0xff7f7f7f, 0xffbcbd22, 0xff17becf};
  return kColors[i % std::size(kColors)];
}

ScatterView::ScatterView(QWidget* parent) : QWidget(parent) { setMinimumSize(300, 200); }

void ScatterView::SetCandidates(const CandidateSet* set) {
  set_ = set;
  filter_ = CandidateFilter{};
  Refit();
}
void ScatterView::SetColorBy(Dimension d) {
  color_by_ = d;
  update();
}
void ScatterView::SetFilter(const CandidateFilter& f) {
  filter_ = f;
  Refit();
}
void ScatterView::SetTokensPerSecond(bool on) {
  tokens_per_s_ = on;
  Refit();
}
void ScatterView::Refit() {
  if (set_) axes_ = FitScatter(*set_, filter_, tokens_per_s_, width(), height());
  update();
}
void ScatterView::resizeEvent(QResizeEvent*) { Refit(); }

int64_t ScatterView::PickAt(QPointF p) const {
  return set_ ? PickCandidate(*set_, filter_, axes_, p.x(), p.y(), 6) : -1;
}

void ScatterView::Paint(QPainter& p, QSize size) const {
  p.fillRect(0, 0, size.width(), size.height(), Qt::white);
  if (!set_) {
    p.drawText(QRect(0, 0, size.width(), size.height()), Qt::AlignCenter,
               "Open a candidates file: parallax plan ... --candidates candidates.json");
    return;
  }
  const ScatterAxes& a = axes_;
  // Axis ticks at round values (1/2/5 steps).
  for (double gx : a.x_ticks) {
    const double x = a.XOfValue(gx);
    p.setPen(QColor(230, 230, 230));
    p.drawLine(QPointF(x, a.top), QPointF(x, a.top + a.height));
    p.setPen(QColor(60, 60, 60));
    p.drawText(QRectF(x - 30, a.top + a.height + 3, 60, 16), Qt::AlignHCenter | Qt::AlignTop,
               QString::asprintf("%g", gx));
  }
  for (double gy : a.y_ticks) {
    const double y = a.YOfValue(gy);
    p.setPen(QColor(230, 230, 230));
    p.drawLine(QPointF(a.left, y), QPointF(a.left + a.width, y));
    p.setPen(QColor(60, 60, 60));
    p.drawText(QRectF(0, y - 8, a.left - 4, 16), Qt::AlignRight | Qt::AlignVCenter,
               QString::fromStdString(ScatterYLabel(gy, a.y_ticks.back(), a.tokens_per_s)));
  }
  p.setPen(QColor(60, 60, 60));
  p.drawRect(a.left, a.top, a.width, a.height);
  p.drawText(QRectF(a.left, a.top + a.height + 20, a.width, 16), Qt::AlignCenter,
             "peak memory per GPU (GiB)");
  p.save();
  p.translate(12, a.top + a.height / 2.0);
  p.rotate(-90);
  p.drawText(QRectF(-80, -10, 160, 16), Qt::AlignCenter, a.tokens_per_s ? "tokens/s" : "step time");
  p.restore();
  // Memory limit.
  const double lim =
      a.XOfValue(static_cast<double>(set_->device_memory_bytes) / (1024.0 * 1024.0 * 1024.0));
  p.setPen(QPen(QColor(200, 30, 30), 1.5, Qt::DashLine));
  p.drawLine(QPointF(lim, a.top), QPointF(lim, a.top + a.height));
  p.drawText(QRectF(lim - 204, a.top + a.height - 20, 200, 16), Qt::AlignRight | Qt::AlignVCenter,
             "device memory limit");
  // Points, coloured by the chosen dimension; legend.
  const auto values = DistinctValues(*set_, color_by_);
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setPen(Qt::NoPen);
  for (const Candidate& c : set_->candidates) {
    if (!c.evaluated() || !filter_.Admits(c)) continue;
    const size_t k = static_cast<size_t>(
        std::lower_bound(values.begin(), values.end(), ValueOf(c.layout, color_by_)) -
        values.begin());
    QColor col = QColor::fromRgb(CategoryColor(k));
    col.setAlpha(170);
    p.setBrush(col);
    p.drawEllipse(QPointF(a.XOf(c), a.YOf(c)), 3.2, 3.2);
  }
  p.setRenderHint(QPainter::Antialiasing, false);
  // Legend in a box at the top right (the corner of slow, memory-hungry layouts: empty).
  const int shown = static_cast<int>(std::min<size_t>(values.size(), 12));
  const QRect box(a.left + a.width - 150, a.top + 6, 142, 24 + 16 * shown);
  p.fillRect(box, QColor(255, 255, 255, 230));
  p.setPen(QColor(200, 200, 200));
  p.setBrush(Qt::NoBrush);
  p.drawRect(box);
  int ly = box.top() + 6;
  p.setPen(QColor(30, 30, 30));
  p.drawText(QPointF(box.left() + 8, ly + 8), QString("colour: ") + ToString(color_by_));
  for (int k = 0; k < shown; ++k) {
    ly += 16;
    p.fillRect(box.left() + 8, ly - 1, 10, 10, QColor::fromRgb(CategoryColor(static_cast<size_t>(k))));
    p.drawText(QPointF(box.left() + 24, ly + 8),
               QString::fromStdString(ValueLabel(color_by_, values[static_cast<size_t>(k)])));
  }
}

void ScatterView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  Paint(p, size());
}

void ScatterView::mouseReleaseEvent(QMouseEvent* e) {
  const int64_t i = PickAt(e->position());
  if (i >= 0) emit candidateClicked(i);
}

bool ScatterView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && set_) {
    auto* he = static_cast<QHelpEvent*>(e);
    const int64_t i = PickAt(he->pos());
    if (i >= 0) {
      const Candidate& c = set_->candidates[static_cast<size_t>(i)];
      QToolTip::showText(
          he->globalPos(),
          QString::fromStdString(LayoutToString(c.layout)) +
              QString::asprintf("\nstep %.4g s, %.4g tokens/s, MFU %.1f%%, peak %.2f GiB",
                                c.step_time_s, c.tokens_per_s, c.mfu * 100,
                                static_cast<double>(c.peak_memory_bytes) / (1 << 30)));
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(e);
}

}  // namespace parallax::gui
