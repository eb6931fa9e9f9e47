#include "gui/models/compare_ops_model.h"

#include <QColor>

#include "gui/core/palette.h"
#include "gui/core/time_axis.h"

namespace parallax::gui {

void CompareOpsModel::SetState(const CompareState* state) {
  beginResetModel();
  state_ = state;
  endResetModel();
}

const ComparedOp* CompareOpsModel::OpAt(int row) const {
  if (!state_ || row < 0 || row >= static_cast<int>(state_->ops().size())) return nullptr;
  return &state_->ops()[static_cast<size_t>(row)];
}

int CompareOpsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !state_ ? 0 : static_cast<int>(state_->ops().size());
}
int CompareOpsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumns;
}

QVariant CompareOpsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const ComparedOp& op = *OpAt(index.row());
  if (role == Qt::BackgroundRole && index.column() == kError)
    return QColor::fromRgb(ErrorColor(op.rel_error));
  if (role == Qt::TextAlignmentRole) {
    return index.column() == kOp ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                                 : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kOp:
      return QString::fromStdString(op.what);
    case kPredicted:
      return QString::fromStdString(FormatDuration(static_cast<double>(op.predicted_ns)));
    case kMeasured:
      return QString::fromStdString(FormatDuration(static_cast<double>(op.measured_ns)));
    case kError:
      return QString::asprintf("%+.1f%%", op.rel_error * 100);
    default:
      return {};
  }
}

QVariant CompareOpsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"op", "predicted", "measured", "error"};
  return section >= 0 && section < kColumns ? QVariant(kNames[section]) : QVariant();
}

}  // namespace parallax::gui
