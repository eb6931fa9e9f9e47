#pragma once
// The per-name table of `parallax trace stats` (count, total, mean, p50, p99, max).

#include <QAbstractTableModel>
#include <vector>

#include "traces/stats.h"

namespace parallax::gui {

class NameStatsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kName, kCount, kTotal, kMean, kP50, kP99, kMax, kColumns };
  using QAbstractTableModel::QAbstractTableModel;
  void SetStats(std::vector<traces::NameStats> names);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<traces::NameStats> names_;
};

}  // namespace parallax::gui
