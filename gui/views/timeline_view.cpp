#include "gui/views/timeline_view.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "gui/core/palette.h"

namespace parallax::gui {
namespace {

QString RowLabel(const traces::Trace& t, const TimelineRow& r) {
  if (r.depth > 0) return {};
  const traces::Track& tr = t.track(r.track);
  return QString::fromStdString(tr.name.empty() ? traces::ToString(tr.stream) : tr.name);
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(false);
  setMinimumSize(400, 200);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

void TimelineView::SetTrace(const traces::Trace* trace, const TimelineIndex* index) {
  trace_ = trace;
  index_ = index;
  colors_ = trace ? ColorTable(*trace) : std::vector<QRgb>{};
  name_width_.assign(colors_.size(), -1);
  selected_ = -1;
  partner_ = -1;
  range_.reset();
  range_rows_.clear();
  search_.Clear();
  v_offset_ = 0;
  Relayout();
  FitAll();
}

void TimelineView::SetStyle(StyleFn fn) {
  style_ = std::move(fn);
  update();
}

void TimelineView::Relayout() {
  geom_.clear();
  row_y_.clear();
  int y = 0;
  if (index_) {
    row_y_.assign(index_->rows().size(), -1);
    for (size_t l = 0; l < index_->lanes().size(); ++l) {
      const Lane& lane = index_->lanes()[l];
      geom_.push_back({RowGeom::kLane, l, y, kLaneHeaderHeight});
      y += kLaneHeaderHeight;
      for (size_t r : lane.rows) {
        geom_.push_back({RowGeom::kSlices, r, y, kRowHeight});
        row_y_[r] = y;
        y += kRowHeight;
      }
      for (size_t c : lane.counter_rows) {
        geom_.push_back({RowGeom::kCounter, c, y, kCounterHeight});
        y += kCounterHeight;
      }
    }
  }
  content_height_ = y;
}

void TimelineView::FitAll() {
  if (!index_) return;
  axis_.Fit(index_->first_ns(), index_->last_ns(), PlotWidth());
  update();
  emit viewChanged();
}

void TimelineView::ZoomToRange(int64_t t0_ns, int64_t t1_ns) {
  axis_.Fit(t0_ns, t1_ns, PlotWidth());
  update();
  emit viewChanged();
}

void TimelineView::ZoomToSelection() {
  if (range_) {
    ZoomToRange(range_->first, range_->second);
  } else if (selected_ >= 0 && trace_) {
    const traces::Slice& s = trace_->slice(static_cast<size_t>(selected_));
    const int64_t pad = std::max<int64_t>(s.dur_ns / 10, 10);
    ZoomToRange(s.start_ns - pad, s.end_ns() + pad);
  }
}

void TimelineView::SelectSlice(int64_t slice, bool center) {
  selected_ = slice;
  if (center && slice >= 0 && trace_) {
    const traces::Slice& s = trace_->slice(static_cast<size_t>(slice));
    const double mid = static_cast<double>(s.start_ns) + static_cast<double>(s.dur_ns) / 2;
    axis_ = TimeAxis(mid - axis_.ns_per_px() * PlotWidth() / 2.0, axis_.ns_per_px());
    if (auto r = index_->RowOfSlice(*trace_, static_cast<uint32_t>(slice))) {
      const int y = row_y_[*r];
      const int visible = height() - kRulerHeight;
      if (y < v_offset_ || y + kRowHeight > v_offset_ + visible)
        v_offset_ = std::max(0, y - visible / 2);
    }
  }
  update();
  emit sliceSelected(slice);
}

void TimelineView::SelectRange(int64_t t0_ns, int64_t t1_ns, std::vector<size_t> rows) {
  if (t1_ns < t0_ns) std::swap(t0_ns, t1_ns);
  range_ = std::make_pair(t0_ns, t1_ns);
  range_rows_ = std::move(rows);
  update();
  emit rangeSelected(t0_ns, t1_ns);
}

std::optional<size_t> TimelineView::RowAt(int y) const {
  const int cy = y - kRulerHeight + v_offset_;
  for (const RowGeom& g : geom_) {
    if (cy >= g.y && cy < g.y + g.h)
      return g.kind == RowGeom::kSlices ? std::optional<size_t>(g.index) : std::nullopt;
  }
  return std::nullopt;
}

int TimelineView::RowY(size_t row) const {
  if (row >= row_y_.size() || row_y_[row] < 0) return -1;
  return row_y_[row] + kRulerHeight - v_offset_;
}

std::optional<uint32_t> TimelineView::SliceAt(QPoint p) const {
  if (!index_ || p.x() < kLabelWidth) return std::nullopt;
  auto row = RowAt(p.y());
  if (!row) return std::nullopt;
  const double x = p.x() - kLabelWidth;
  const auto t = static_cast<int64_t>(std::llround(axis_.ToNs(x)));
  return index_->HitTest(*trace_, *row, t, static_cast<int64_t>(std::ceil(2 * axis_.ns_per_px())));
}

void TimelineView::ScrollRows(int dy) {
  const int visible = height() - kRulerHeight;
  v_offset_ = std::clamp(v_offset_ + dy, 0, std::max(0, content_height_ - visible));
  update();
}

int TimelineView::NameWidth(traces::StringId id, const QFontMetrics& fm) const {
  if (id >= name_width_.size()) return 1 << 14;
  if (name_width_[id] < 0) {
    const auto v = trace_->Str(id);
    const int w =
        fm.horizontalAdvance(QString::fromUtf8(v.data(), static_cast<qsizetype>(v.size())));
    name_width_[id] = static_cast<int16_t>(std::min(w, 32000));
  }
  return name_width_[id];
}

void TimelineView::Paint(QPainter& p, QSize size) const {
  const int w = size.width(), h = size.height();
  p.fillRect(0, 0, w, h, QColor(250, 250, 252));
  if (!index_) {
    p.setPen(QColor(90, 90, 90));
    p.drawText(QRect(0, 0, w, h), Qt::AlignCenter,
               "Open a trace, plan or candidates file (File > Open, or drop it here)");
    return;
  }
  const int plot_w = std::max(w - kLabelWidth, 1);
  for (const RowGeom& g : geom_) {
    const int y = g.y + kRulerHeight - v_offset_;
    if (y + g.h < kRulerHeight || y > h) continue;
    p.save();
    p.setClipRect(0, std::max(y, kRulerHeight), w, g.h);
    if (g.kind == RowGeom::kLane) {
      p.fillRect(0, y, w, g.h, QColor(226, 230, 238));
      p.setPen(QColor(30, 40, 60));
      QFont f = p.font();
      f.setBold(true);
      p.setFont(f);
      p.drawText(QRect(6, y, w - 6, g.h), Qt::AlignVCenter | Qt::AlignLeft,
                 QString::fromStdString(index_->lanes()[g.index].label));
    } else {
      p.setPen(QColor(70, 70, 80));
      if (g.kind == RowGeom::kSlices) {
        p.drawText(QRect(14, y, kLabelWidth - 18, g.h), Qt::AlignVCenter | Qt::AlignLeft,
                   RowLabel(*trace_, index_->rows()[g.index]));
        p.translate(kLabelWidth, 0);
        p.setClipRect(0, std::max(y, kRulerHeight), plot_w, g.h);
        PaintSlices(p, g, y, plot_w);
      } else {
        const CounterRow& c = index_->counter_rows()[g.index];
        p.drawText(QRect(14, y, kLabelWidth - 18, g.h), Qt::AlignVCenter | Qt::AlignLeft,
                   QString::fromStdString(std::string(trace_->Str(c.name)) + " " +
                                          std::string(trace_->Str(c.series))));
        p.translate(kLabelWidth, 0);
        p.setClipRect(0, std::max(y, kRulerHeight), plot_w, g.h);
        PaintCounter(p, g, y, plot_w);
      }
    }
    p.restore();
  }
  // Label column separator, range selection, flows, ruler.
  p.setPen(QColor(200, 204, 212));
  p.drawLine(kLabelWidth - 1, kRulerHeight, kLabelWidth - 1, h);
  p.save();
  p.translate(kLabelWidth, 0);
  p.setClipRect(0, kRulerHeight, plot_w, h - kRulerHeight);
  if (range_) {
    const double x0 =
        std::clamp(axis_.ToPx(static_cast<double>(range_->first)), -1.0, plot_w + 1.0);
    const double x1 =
        std::clamp(axis_.ToPx(static_cast<double>(range_->second)), -1.0, plot_w + 1.0);
    p.fillRect(QRectF(x0, kRulerHeight, std::max(x1 - x0, 1.0), h - kRulerHeight),
               QColor(60, 120, 220, 40));
    p.setPen(QColor(60, 120, 220));
    p.drawLine(QPointF(x0, kRulerHeight), QPointF(x0, h));
    p.drawLine(QPointF(x1, kRulerHeight), QPointF(x1, h));
  }
  PaintFlows(p, plot_w);
  p.restore();
  PaintRuler(p, w);
}

void TimelineView::PaintRuler(QPainter& p, int w) const {
  p.fillRect(0, 0, w, kRulerHeight, QColor(238, 240, 245));
  p.setPen(QColor(120, 124, 135));
  p.drawLine(0, kRulerHeight - 1, w, kRulerHeight - 1);
  p.setPen(QColor(40, 40, 50));
  p.drawText(QRect(6, 0, kLabelWidth - 8, kRulerHeight), Qt::AlignVCenter | Qt::AlignLeft,
             QString::fromStdString(FormatDuration(axis_.ns_per_px())) + "/px");
  const int plot_w = std::max(w - kLabelWidth, 1);
  for (const RulerTick& t : RulerTicks(axis_, plot_w, index_->first_ns())) {
    const int x = kLabelWidth + static_cast<int>(t.x_px);
    p.setPen(QColor(120, 124, 135));
    p.drawLine(x, kRulerHeight - 7, x, kRulerHeight - 1);
    p.setPen(QColor(40, 40, 50));
    p.drawText(x + 3, kRulerHeight - 9, QString::fromStdString(t.label));
  }
}

void TimelineView::PaintSlices(QPainter& p, const RowGeom& g, int y, int w) const {
  const int64_t t0 = static_cast<int64_t>(std::floor(axis_.ToNs(0)));
  const int64_t t1 = static_cast<int64_t>(std::ceil(axis_.ToNs(w)));
  const double npp = axis_.ns_per_px();
  const QFontMetrics fm = p.fontMetrics();
  const bool searching = search_.active();
  const int top = y + 1, hh = g.h - 2;
  // Busy blocks (merged sub-pixel slices) share one colour and are coalesced into one rectangle
  // per contiguous run, so a dense row at full zoom-out costs a handful of fills.
  constexpr QRgb kBusy = 0xff7d8aa3;
  int run_x0 = 0, run_x1 = -1;
  auto flush = [&] {
    if (run_x1 >= run_x0)
      p.fillRect(QRect(run_x0, top, run_x1 - run_x0 + 1, hh), QColor::fromRgb(kBusy));
    run_x1 = run_x0 - 1;
  };
  index_->Visit(*trace_, g.index, t0, t1, npp, [&](const DrawBox& b) {
    const double fx0 = std::max(axis_.ToPx(static_cast<double>(b.start_ns)), -2.0);
    const double fx1 = std::min(axis_.ToPx(static_cast<double>(b.end_ns)), w + 2.0);
    const int x0 = static_cast<int>(std::floor(fx0));
    const int x1 = std::max(static_cast<int>(std::ceil(fx1)) - 1, x0);  // inclusive
    const traces::Slice& s = trace_->slice(b.slice);
    if (b.count > 1 && !style_ && !searching) {
      if (x0 <= run_x1 + 1) {
        run_x1 = std::max(run_x1, x1);
      } else {
        flush();
        run_x0 = x0;
        run_x1 = x1;
      }
      return;
    }
    flush();
    SliceStyle st = style_ ? style_(b.slice) : SliceStyle{colors_[s.name], false};
    QRgb c = b.count > 1 ? Darker(st.fill, 82) : st.fill;
    if (searching && !search_.IsMatch(s.name)) c = 0xffdcdce0;
    const QRect r(x0, top, x1 - x0 + 1, hh);
    p.fillRect(r, QColor::fromRgb(c));
    if (st.hatched) p.fillRect(r, QBrush(QColor(90, 90, 90), Qt::BDiagPattern));
    if ((static_cast<int64_t>(b.slice) == selected_ || static_cast<int64_t>(b.slice) == partner_) &&
        b.count == 1) {
      p.setPen(QPen(QColor(0, 0, 0), 2));
      p.drawRect(r.adjusted(1, 1, -1, -1));
    }
    const double bw = fx1 - fx0;
    if (b.count == 1 && bw > 24) {
      const int nw = NameWidth(s.name, fm);
      if (nw + 6 <= bw) {
        p.setPen(QColor(20, 20, 28));
        const double tx = std::max(fx0, 0.0) + 3;
        p.drawText(QPointF(std::min(tx, fx1 - nw - 3), top + hh - 3),
                   QString::fromUtf8(trace_->Str(s.name).data(),
                                     static_cast<qsizetype>(trace_->Str(s.name).size())));
      }
    }
  });
  flush();
}

void TimelineView::PaintCounter(QPainter& p, const RowGeom& g, int y, int w) const {
  const CounterRow& row = index_->counter_rows()[g.index];
  const auto& counters = trace_->counters();
  if (row.samples.empty() || row.max_value <= 0) return;
  QPainterPath path;
  const double base = y + g.h - 1;
  const double scale = (g.h - 4) / row.max_value;
  path.moveTo(0, base);
  // Per pixel column: the last sample at or before the column's end (a step chart).
  size_t lo = 0;
  for (int x = 0; x <= w; ++x) {
    const double t = axis_.ToNs(x + 1);
    size_t hi = row.samples.size();
    size_t a = lo;
    while (a < hi) {
      const size_t mid = (a + hi) / 2;
      if (static_cast<double>(counters[row.samples[mid]].ts_ns) <= t)
        a = mid + 1;
      else
        hi = mid;
    }
    lo = a > 0 ? a - 1 : 0;
    const double v = a == 0 ? 0 : counters[row.samples[a - 1]].value;
    path.lineTo(x, base - v * scale);
  }
  path.lineTo(w, base);
  path.closeSubpath();
  p.fillPath(path, QColor(90, 150, 210, 150));
  p.setPen(QColor(60, 60, 70));
  p.drawText(QPointF(4, y + 12),
             QString::fromStdString("max " + FormatCounterValue(trace_->Str(row.name),
                                                                trace_->Str(row.series),
                                                                row.max_value)));
}

void TimelineView::PaintFlows(QPainter& p, int w) const {
  if (selected_ < 0 || !trace_) return;
  auto y_of = [&](traces::TrackId track) -> double {
    auto r = index_->TopRowOfTrack(track);
    return r ? RowY(*r) + kRowHeight / 2.0 : -1;
  };
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setPen(QPen(QColor(20, 20, 20), 1.5));
  for (size_t i : FlowsOfSlice(*trace_, static_cast<uint32_t>(selected_))) {
    const traces::Flow& f = trace_->flows()[i];
    const double y0 = y_of(f.from_track), y1 = y_of(f.to_track);
    if (y0 < 0 || y1 < 0) continue;
    const QPointF a(axis_.ToPx(static_cast<double>(f.from_ns)), y0),
        b(axis_.ToPx(static_cast<double>(f.to_ns)), y1);
    if ((a.x() < 0 && b.x() < 0) || (a.x() > w && b.x() > w)) continue;
    p.drawLine(a, b);
    const double ang = std::atan2(b.y() - a.y(), b.x() - a.x());
    const QPointF h1 = b - QPointF(std::cos(ang - 0.4) * 8, std::sin(ang - 0.4) * 8);
    const QPointF h2 = b - QPointF(std::cos(ang + 0.4) * 8, std::sin(ang + 0.4) * 8);
    p.drawLine(b, h1);
    p.drawLine(b, h2);
  }
  p.setRenderHint(QPainter::Antialiasing, false);
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  Paint(p, size());
}

void TimelineView::wheelEvent(QWheelEvent* e) {
  const double steps = e->angleDelta().y() / 120.0;
  if (e->modifiers() & Qt::ShiftModifier) {
    ScrollRows(static_cast<int>(-steps * 3 * kRowHeight));
  } else {
    axis_.ZoomAround(e->position().x() - kLabelWidth, std::pow(0.8, steps));
    update();
    emit viewChanged();
  }
  e->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
  press_pos_ = last_pos_ = e->position().toPoint();
  dragging_ = false;
  range_drag_ = (e->modifiers() & Qt::ShiftModifier) != 0;
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
  const QPoint pos = e->position().toPoint();
  if ((pos - press_pos_).manhattanLength() > 3) dragging_ = true;
  if (!dragging_) return;
  if (range_drag_) {
    const auto t0 = static_cast<int64_t>(axis_.ToNs(press_pos_.x() - kLabelWidth));
    const auto t1 = static_cast<int64_t>(axis_.ToNs(pos.x() - kLabelWidth));
    range_ = std::make_pair(std::min(t0, t1), std::max(t0, t1));
    update();
  } else {
    axis_.Pan(pos.x() - last_pos_.x());
    ScrollRows(last_pos_.y() - pos.y());
    emit viewChanged();
  }
  last_pos_ = pos;
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
  const QPoint pos = e->position().toPoint();
  if (dragging_ && range_drag_) {
    const auto t0 = static_cast<int64_t>(axis_.ToNs(press_pos_.x() - kLabelWidth));
    const auto t1 = static_cast<int64_t>(axis_.ToNs(pos.x() - kLabelWidth));
    std::vector<size_t> rows;
    const int ya = std::min(press_pos_.y(), pos.y()), yb = std::max(press_pos_.y(), pos.y());
    for (const RowGeom& g : geom_) {
      const int y = g.y + kRulerHeight - v_offset_;
      if (g.kind == RowGeom::kSlices && y + g.h > ya && y <= yb) rows.push_back(g.index);
    }
    SelectRange(t0, t1, std::move(rows));
  } else if (!dragging_) {
    auto hit = SliceAt(pos);
    SelectSlice(hit ? static_cast<int64_t>(*hit) : -1);
  }
  dragging_ = false;
}

void TimelineView::keyPressEvent(QKeyEvent* e) {
  const double cx = PlotWidth() / 2.0;
  switch (e->key()) {
    case Qt::Key_W:
      axis_.ZoomAround(cx, 0.7);
      break;
    case Qt::Key_S:
      axis_.ZoomAround(cx, 1 / 0.7);
      break;
    case Qt::Key_A:
      axis_.Pan(PlotWidth() / 5.0);
      break;
    case Qt::Key_D:
      axis_.Pan(-PlotWidth() / 5.0);
      break;
    case Qt::Key_F:
      FitAll();
      return;
    case Qt::Key_Z:
      ZoomToSelection();
      return;
    default:
      QWidget::keyPressEvent(e);
      return;
  }
  update();
  emit viewChanged();
}

void TimelineView::resizeEvent(QResizeEvent*) { ScrollRows(0); }

}  // namespace parallax::gui
