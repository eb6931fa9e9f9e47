#include "gui/views/modes_view.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>

#include "gui/views/scatter_view.h"

namespace parallax::gui {
namespace {

constexpr double kMargin = 56;

QColor ModeColor(size_t i) { return QColor::fromRgb(CategoryColor(i)); }

//! One panel's plot area inside `cell`, with its frame, title and axis labels drawn.
QRectF Frame(QPainter& p, const QRectF& cell, const QString& title, const QString& x_label, const QString& y_label) {
  const QRectF area(cell.left() + kMargin, cell.top() + 28, cell.width() - kMargin - 12, cell.height() - 28 - 40);
  p.setPen(QColor(60, 60, 60));
  p.drawRect(area);
  QFont f = p.font();
  f.setBold(true);
  p.setFont(f);
  p.drawText(QRectF(cell.left(), cell.top() + 4, cell.width(), 20), Qt::AlignCenter, title);
  f.setBold(false);
  p.setFont(f);
  p.drawText(QRectF(area.left(), area.bottom() + 20, area.width(), 16), Qt::AlignCenter, x_label);
  p.save();
  p.translate(cell.left() + 12, area.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-area.height() / 2, -8, area.height(), 16), Qt::AlignCenter, y_label);
  p.restore();
  return area;
}

void Ticks(QPainter& p, const QRectF& a, double x_hi, double y_lo, double y_hi, const char* x_fmt) {
  p.setPen(QColor(60, 60, 60));
  for (int i = 0; i <= 4; ++i) {
    const double fx = i / 4.0, y = a.bottom() - fx * a.height();
    p.drawText(QRectF(a.left() + fx * a.width() - 30, a.bottom() + 3, 60, 16), Qt::AlignHCenter | Qt::AlignTop,
               QString::asprintf(x_fmt, fx * x_hi));
    p.drawText(QRectF(a.left() - kMargin + 14, y - 8, kMargin - 18, 16), Qt::AlignRight | Qt::AlignVCenter,
               QString::asprintf("%.3g", y_lo + fx * (y_hi - y_lo)));
  }
}

//! Loss of every mode against its step index (by_time false) or its wall clock (true).
void Curves(QPainter& p, const ModesComparison& c, const QRectF& a, bool by_time) {
  const Range r = LossRange(c);
  size_t steps = 1;
  for (const ModeCurve& m : c.modes) steps = std::max(steps, m.losses.size());
  const double x_hi = by_time ? LastWallClock(c) : static_cast<double>(steps - 1);
  Ticks(p, a, x_hi, r.lo, r.hi, by_time ? "%.3g" : "%.0f");
  p.setRenderHint(QPainter::Antialiasing, true);
  for (size_t k = 0; k < c.modes.size(); ++k) {
    const ModeCurve& m = c.modes[k];
    QPainterPath path;
    for (size_t i = 0; i < m.losses.size(); ++i) {
      const double x = by_time ? m.wall_clock_s[i] : static_cast<double>(i);
      const QPointF pt(a.left() + x / std::max(x_hi, 1e-12) * a.width(),
                       a.bottom() - (m.losses[i] - r.lo) / (r.hi - r.lo) * a.height());
      if (i == 0) path.moveTo(pt); else path.lineTo(pt);
    }
    p.setPen(QPen(ModeColor(k), 2));
    p.drawPath(path);
  }
  p.setRenderHint(QPainter::Antialiasing, false);
}

//! Per mode two bars: predicted (light, outlined) and measured (solid) tokens per second.
void Throughput(QPainter& p, const ModesComparison& c, const QRectF& a) {
  const double top = MaxTokensPerSecond(c) * 1.1;
  Ticks(p, a, 0, 0, top / 1e3, "");
  const double slot = a.width() / static_cast<double>(std::max<size_t>(c.modes.size(), 1));
  for (size_t k = 0; k < c.modes.size(); ++k) {
    const ModeCurve& m = c.modes[k];
    const double x = a.left() + slot * static_cast<double>(k) + slot * 0.15, w = slot * 0.33;
    const double hp = m.predicted_tokens_per_s / top * a.height(), hm = m.measured_tokens_per_s / top * a.height();
    QColor light = ModeColor(k);
    light.setAlpha(70);
    p.fillRect(QRectF(x, a.bottom() - hp, w, hp), light);
    p.setPen(QPen(ModeColor(k), 1, Qt::DashLine));
    p.drawRect(QRectF(x, a.bottom() - hp, w, hp));
    p.fillRect(QRectF(x + w, a.bottom() - hm, w, hm), ModeColor(k));
  }
  p.setPen(QColor(60, 60, 60));
  p.drawText(QRectF(a.left(), a.top() + 4, a.width() - 6, 16), Qt::AlignRight,
             "left: predicted (outlined), right: measured");
}

}  // namespace

ModesView::ModesView(QWidget* parent) : QWidget(parent) { setMinimumSize(600, 300); }

void ModesView::SetComparison(ModesComparison c) {
  c_ = std::move(c);
  update();
}

void ModesView::Paint(QPainter& p, QSize size) const {
  p.fillRect(0, 0, size.width(), size.height(), Qt::white);
  if (c_.modes.empty()) {
    p.drawText(QRect(0, 0, size.width(), size.height()), Qt::AlignCenter,
               "Open a compare-modes file: parallax compare-modes ... -o out (out.json)");
    return;
  }
  const size_t legend_rows = (c_.modes.size() + 2) / 3;  // three modes a row
  const double legend_h = 24.0 * static_cast<double>(legend_rows) + 30;
  const double w = size.width() / 3.0, h = size.height() - legend_h;
  Curves(p, c_, Frame(p, QRectF(0, 0, w, h), "loss vs step", "step", "loss"), false);
  Curves(p, c_, Frame(p, QRectF(w, 0, w, h), "loss vs wall clock", "seconds", "loss"), true);
  Throughput(p, c_, Frame(p, QRectF(2 * w, 0, w, h), "throughput", "mode", "thousand tokens/s"));
  p.setPen(QColor(60, 60, 60));
  const QString title = QString::fromStdString(c_.model) + QString::asprintf(", %lld workers", static_cast<long long>(c_.workers)) +
                        (c_.inject_slow.empty() ? QString() : QString::fromStdString(", slow " + c_.inject_slow));
  p.drawText(QRectF(8, h + 4, size.width() - 16, 18), Qt::AlignLeft, title);
  for (size_t k = 0; k < c_.modes.size(); ++k) {
    const size_t row = k / 3, column = k % 3;
    const double x = 8 + static_cast<double>(column) * w, y = h + 26 + 24.0 * static_cast<double>(row);
    p.fillRect(QRectF(x, y + 3, 12, 12), ModeColor(k));
    p.drawText(QPointF(x + 18, y + 14), QString::fromStdString(c_.modes[k].mode));
  }
}

void ModesView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  Paint(p, size());
}

}  // namespace parallax::gui
