#pragma once
// The comparison's op table: matched ops by absolute error, largest first.

#include <QAbstractTableModel>

#include "gui/core/compare_state.h"

namespace parallax::gui {

class CompareOpsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kOp, kPredicted, kMeasured, kError, kColumns };
  using QAbstractTableModel::QAbstractTableModel;
  //! Shows `state`'s ops (not owned; call again after the state changes). nullptr clears.
  void SetState(const CompareState* state);
  const ComparedOp* OpAt(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  const CompareState* state_ = nullptr;
};

}  // namespace parallax::gui
