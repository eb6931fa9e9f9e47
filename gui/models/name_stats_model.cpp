#include "gui/models/name_stats_model.h"

#include "gui/core/time_axis.h"

namespace parallax::gui {

void NameStatsModel::SetStats(std::vector<traces::NameStats> names) {
  beginResetModel();
  names_ = std::move(names);
  endResetModel();
}

int NameStatsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(names_.size());
}
int NameStatsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumns;
}

QVariant NameStatsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  if (role == Qt::TextAlignmentRole) {
    return index.column() == kName ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                                   : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole) return {};
  const traces::NameStats& n = names_[static_cast<size_t>(index.row())];
  auto dur = [](int64_t ns) {
    return QString::fromStdString(FormatDuration(static_cast<double>(ns)));
  };
  switch (index.column()) {
    case kName:
      return QString::fromStdString(n.name);
    case kCount:
      return static_cast<qlonglong>(n.count);
    case kTotal:
      return dur(n.total_ns);
    case kMean:
      return dur(n.mean_ns);
    case kP50:
      return dur(n.p50_ns);
    case kP99:
      return dur(n.p99_ns);
    case kMax:
      return dur(n.max_ns);
    default:
      return {};
  }
}

QVariant NameStatsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"name", "count", "total", "mean", "p50", "p99", "max"};
  return section >= 0 && section < kColumns ? QVariant(kNames[section]) : QVariant();
}

}  // namespace parallax::gui
