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
  p.setPen(QColor(60, 60, 60));
  p.drawRect(a.left, a.top, a.width, a.height);
  // Axis ticks: 5 per axis.
  for (int i = 0; i <= 5; ++i) {
    const double gx = a.x_min + (a.x_max - a.x_min) * i / 5,
                 gy = a.y_min + (a.y_max - a.y_min) * i / 5;
    const double x = a.XOfValue(gx), y = a.YOfValue(gy);
    p.setPen(QColor(230, 230, 230));
    p.drawLine(QPointF(x, a.top), QPointF(x, a.top + a.height));
    p.drawLine(QPointF(a.left, y), QPointF(a.left + a.width, y));
    p.setPen(QColor(60, 60, 60));
    p.drawText(QPointF(x - 14, a.top + a.height + 15), QString::asprintf("%.0f", gx));
    const QString yl = a.tokens_per_s ? QString::asprintf("%.3g", gy)
                                      : QString::fromStdString(FormatDuration(gy * 1e9));
    p.drawText(QRectF(0, y - 8, a.left - 4, 16), Qt::AlignRight | Qt::AlignVCenter, yl);
  }
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
  p.drawText(QRectF(lim - 204, a.top + 2, 200, 16), Qt::AlignRight | Qt::AlignVCenter,
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
  int ly = a.top + 8;
  p.setPen(QColor(30, 30, 30));
  p.drawText(QPointF(a.left + a.width - 260, ly + 4), QString("colour: ") + ToString(color_by_));
  for (size_t k = 0; k < values.size() && k < 12; ++k) {
    ly += 16;
    p.fillRect(a.left + a.width - 260, ly - 5, 10, 10, QColor::fromRgb(CategoryColor(k)));
    p.drawText(QPointF(a.left + a.width - 244, ly + 4),
               QString::fromStdString(ValueLabel(color_by_, values[k])));
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
