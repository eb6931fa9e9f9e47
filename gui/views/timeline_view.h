#pragma once
// The timeline widget: a thin view over TimelineIndex/TimeAxis. Ruler on top, a label column on
// the left, one lane per rank with a row per (stream, depth) and counter area charts.
// Keys as in Perfetto/Tracy: W/S zoom, A/D pan, F fit all, Z zoom to the selection. Wheel zooms
// around the cursor (Shift+wheel scrolls rows), dragging pans, Shift+drag selects a time range
// over the rows it crosses, a click selects a slice.

#include <QWidget>
#include <functional>
#include <optional>

#include "gui/core/selection.h"
#include "gui/core/time_axis.h"
#include "gui/core/timeline_index.h"

namespace parallax::gui {

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kRulerHeight = 24;
  static constexpr int kLabelWidth = 170;
  static constexpr int kLaneHeaderHeight = 18;
  static constexpr int kRowHeight = 17;
  static constexpr int kCounterHeight = 32;

  struct SliceStyle {
    QRgb fill = 0;
    bool hatched = false;  //!< unmatched in a comparison
  };
  using StyleFn = std::function<SliceStyle(uint32_t slice)>;

  explicit TimelineView(QWidget* parent = nullptr);

  //! Shows a trace (not owned; nullptr clears) and fits it.
  void SetTrace(const traces::Trace* trace, const TimelineIndex* index);
  //! Overrides slice colours (comparison error colouring); empty: colour by name.
  void SetStyle(StyleFn fn);
  const traces::Trace* trace() const { return trace_; }
  const TimelineIndex* index() const { return index_; }

  TimeAxis& axis() { return axis_; }
  const TimeAxis& axis() const { return axis_; }
  int PlotWidth() const { return std::max(width() - kLabelWidth, 1); }
  void FitAll();
  void ZoomToRange(int64_t t0_ns, int64_t t1_ns);
  void ZoomToSelection();

  void SelectSlice(int64_t slice, bool center = false);  //!< -1 clears
  int64_t selected_slice() const { return selected_; }
  //! A second slice drawn as selected (the other side of a compared op); -1: none.
  void SetPartner(int64_t slice) {
    partner_ = slice;
    update();
  }
  int64_t partner_slice() const { return partner_; }
  //! Time range selection over rows; aggregates are emitted with rangeSelected.
  void SelectRange(int64_t t0_ns, int64_t t1_ns, std::vector<size_t> rows);
  std::optional<std::pair<int64_t, int64_t>> selected_range() const { return range_; }
  const std::vector<size_t>& range_rows() const { return range_rows_; }

  SliceSearch& search() { return search_; }

  //! Row under a widget y, or nullopt (slice rows only).
  std::optional<size_t> RowAt(int y) const;
  //! Widget y of the top of a slice row, or -1 when the row is not laid out.
  int RowY(size_t row) const;
  //! The slice under a widget point.
  std::optional<uint32_t> SliceAt(QPoint p) const;
  //! Scrolls rows vertically by `dy` pixels.
  void ScrollRows(int dy);

  //! Paints the whole view into `painter` (widget and offscreen rendering share this).
  void Paint(QPainter& painter, QSize size) const;

 signals:
  void sliceSelected(qint64 slice);
  void rangeSelected(qint64 t0_ns, qint64 t1_ns);
  void viewChanged();

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  void resizeEvent(QResizeEvent*) override;

 private:
  struct RowGeom {
    enum Kind { kLane, kSlices, kCounter } kind = kSlices;
    size_t index = 0;  // lane, row or counter row
    int y = 0, h = 0;  // content y (before scrolling)
  };
  void Relayout();
  void PaintRuler(QPainter& p, int w) const;
  void PaintSlices(QPainter& p, const RowGeom& g, int y, int w) const;
  void PaintCounter(QPainter& p, const RowGeom& g, int y, int w) const;
  void PaintFlows(QPainter& p, int w) const;
  int NameWidth(traces::StringId id, const QFontMetrics& fm) const;

  const traces::Trace* trace_ = nullptr;
  const TimelineIndex* index_ = nullptr;
  StyleFn style_;
  std::vector<QRgb> colors_;
  mutable std::vector<int16_t> name_width_;  // by StringId, -1: not measured
  std::vector<RowGeom> geom_;
  std::vector<int> row_y_;  // by slice row
  int content_height_ = 0;
  int v_offset_ = 0;
  TimeAxis axis_;
  int64_t selected_ = -1;
  int64_t partner_ = -1;
  std::optional<std::pair<int64_t, int64_t>> range_;
  std::vector<size_t> range_rows_;
  SliceSearch search_;
  // Mouse state.
  QPoint press_pos_;
  QPoint last_pos_;
  bool dragging_ = false;
  bool range_drag_ = false;
};

}  // namespace parallax::gui
