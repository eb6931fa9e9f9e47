#pragma once
// Interval arithmetic on [start, end) ns intervals: union length and intersection length of
// two unions. Used for busy time, idle time and compute/communication overlap.

#include <cstdint>
#include <utility>
#include <vector>

namespace parallax::traces {

using Interval = std::pair<int64_t, int64_t>;  //!< [start_ns, end_ns)

//! Sorts and merges overlapping or touching intervals in place.
void Normalize(std::vector<Interval>& v);
//! Total length of normalized intervals.
int64_t TotalLength(const std::vector<Interval>& normalized);
//! Length of the intersection of two normalized interval lists.
int64_t IntersectionLength(const std::vector<Interval>& a, const std::vector<Interval>& b);

}  // namespace parallax::traces
