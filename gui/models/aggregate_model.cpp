#include "gui/models/aggregate_model.h"

#include <algorithm>

#include "gui/core/time_axis.h"

namespace parallax::gui {
namespace {

QVariant Raw(const NameAggregate& a, int column) {
  switch (column) {
    case AggregateModel::kName:
      return QString::fromStdString(a.name);
    case AggregateModel::kCount:
      return static_cast<qlonglong>(a.count);
    case AggregateModel::kTotal:
      return static_cast<qlonglong>(a.total_ns);
    case AggregateModel::kMean:
      return static_cast<qlonglong>(a.mean_ns);
    case AggregateModel::kP50:
      return static_cast<qlonglong>(a.p50_ns);
    case AggregateModel::kP99:
      return static_cast<qlonglong>(a.p99_ns);
    default:
      return {};
  }
}

}  // namespace

void AggregateModel::SetRows(std::vector<NameAggregate> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

int AggregateModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int AggregateModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumns;
}

QVariant AggregateModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const NameAggregate& a = rows_[static_cast<size_t>(index.row())];
  if (role == kSortRole) return Raw(a, index.column());
  if (role == Qt::TextAlignmentRole) {
    return index.column() == kName ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                                   : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole) return {};
  if (index.column() == kName || index.column() == kCount) return Raw(a, index.column());
  return QString::fromStdString(
      FormatDuration(static_cast<double>(Raw(a, index.column()).toLongLong())));
}

QVariant AggregateModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"name", "count", "total", "mean", "p50", "p99"};
  return section >= 0 && section < kColumns ? QVariant(kNames[section]) : QVariant();
}

void AggregateModel::sort(int column, Qt::SortOrder order) {
  if (column < 0 || column >= kColumns) return;
  emit layoutAboutToBeChanged({}, QAbstractItemModel::VerticalSortHint);
  const QModelIndexList before = persistentIndexList();
  std::vector<size_t> perm(rows_.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  std::stable_sort(perm.begin(), perm.end(), [&](size_t x, size_t y) {
    const QVariant a = Raw(rows_[x], column), b = Raw(rows_[y], column);
    const bool less =
        column == kName ? a.toString() < b.toString() : a.toLongLong() < b.toLongLong();
    const bool greater =
        column == kName ? b.toString() < a.toString() : b.toLongLong() < a.toLongLong();
    return order == Qt::AscendingOrder ? less : greater;
  });
  std::vector<NameAggregate> sorted;
  std::vector<int> new_row(rows_.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    sorted.push_back(std::move(rows_[perm[i]]));
    new_row[perm[i]] = static_cast<int>(i);
  }
  rows_ = std::move(sorted);
  QModelIndexList after;
  for (const QModelIndex& i : before)
    after.push_back(index(new_row[static_cast<size_t>(i.row())], i.column()));
  changePersistentIndexList(before, after);
  emit layoutChanged({}, QAbstractItemModel::VerticalSortHint);
}

}  // namespace parallax::gui
