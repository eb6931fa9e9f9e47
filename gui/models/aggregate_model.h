#pragma once
// The range-selection table: per name count, total, mean, p50, p99 (sortable by any column).

#include <QAbstractTableModel>
#include <vector>

#include "gui/core/selection.h"

namespace parallax::gui {

class AggregateModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kName, kCount, kTotal, kMean, kP50, kP99, kColumns };
  //! Raw numbers (ns, counts) for sorting and tests under this role; DisplayRole shows units.
  static constexpr int kSortRole = Qt::UserRole + 1;

  using QAbstractTableModel::QAbstractTableModel;
  void SetRows(std::vector<NameAggregate> rows);
  const std::vector<NameAggregate>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;
  void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

 private:
  std::vector<NameAggregate> rows_;
};

}  // namespace parallax::gui
