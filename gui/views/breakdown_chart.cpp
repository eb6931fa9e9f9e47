#include "gui/views/breakdown_chart.h"

#include <QPainter>
#include <algorithm>

#include "gui/core/time_axis.h"

namespace parallax::gui {

BreakdownChart::BreakdownChart(QWidget* parent) : QWidget(parent) { setMinimumHeight(80); }

void BreakdownChart::SetBreakdown(std::vector<traces::RankBreakdown> ranks) {
  ranks_ = std::move(ranks);
  updateGeometry();
  update();
}

QSize BreakdownChart::sizeHint() const {
  return {600, 50 + 22 * static_cast<int>(std::max<size_t>(ranks_.size(), 1))};
}

void BreakdownChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  const QColor kColors[] = {QColor(86, 140, 214), QColor(235, 120, 70), QColor(70, 180, 180),
                            QColor(205, 205, 210)};
  const char* kNames[] = {"compute", "exposed communication", "other device work", "idle"};
  int x = 80;
  for (int i = 0; i < 4; ++i) {
    p.fillRect(x, 8, 12, 12, kColors[i]);
    p.setPen(Qt::black);
    p.drawText(x + 16, 19, kNames[i]);
    x += 30 + p.fontMetrics().horizontalAdvance(kNames[i]);
  }
  if (ranks_.empty()) {
    p.drawText(QRect(0, 30, width(), 30), Qt::AlignCenter, "no device slices");
    return;
  }
  int64_t max_span = 1;
  for (const auto& r : ranks_) max_span = std::max(max_span, r.span_ns);
  const int bar_w = std::max(width() - 180, 50);
  int y = 32;
  for (const auto& r : ranks_) {
    const int64_t exposed = std::max<int64_t>(r.comm_ns - r.overlap_ns, 0);
    const int64_t other = std::max<int64_t>(r.span_ns - r.compute_ns - exposed - r.idle_ns, 0);
    const int64_t parts[] = {r.compute_ns, exposed, other, r.idle_ns};
    p.setPen(Qt::black);
    p.drawText(QRect(4, y, 70, 18), Qt::AlignVCenter | Qt::AlignRight,
               QString("rank %1").arg(r.rank));
    double bx = 80;
    for (int i = 0; i < 4; ++i) {
      const double w = static_cast<double>(parts[i]) / static_cast<double>(max_span) * bar_w;
      p.fillRect(QRectF(bx, y, w, 18), kColors[i]);
      bx += w;
    }
    p.drawText(QRectF(bx + 6, y, 120, 18), Qt::AlignVCenter | Qt::AlignLeft,
               QString::fromStdString(FormatDuration(static_cast<double>(r.span_ns))));
    y += 22;
  }
}

}  // namespace parallax::gui
