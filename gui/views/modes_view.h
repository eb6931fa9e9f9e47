#pragma once
// The classic modes compared (`parallax compare-modes` JSON, gui/core/modes_data.h): loss against
// step, loss against wall clock, and each mode's predicted beside its measured throughput, one
// colour per mode.

#include <QWidget>

#include "gui/core/modes_data.h"

namespace parallax::gui {

class ModesView : public QWidget {
  Q_OBJECT
 public:
  explicit ModesView(QWidget* parent = nullptr);
  void SetComparison(ModesComparison c);
  const ModesComparison& comparison() const { return c_; }
  void Paint(QPainter& p, QSize size) const;

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  ModesComparison c_;
};

}  // namespace parallax::gui
