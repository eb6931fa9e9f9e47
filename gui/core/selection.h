#pragma once
// What the user selected: one slice's details, a time range's per-name aggregates, and a name
// search with next/previous.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gui/core/timeline_index.h"
#include "traces/trace.h"

namespace parallax::gui {

//! A selected slice as label/value lines: name, category, track, op identity, start (relative to
//! the trace start), duration, FLOPs, bytes, group size and the achieved TFLOP/s or GB/s.
std::vector<std::pair<std::string, std::string>> DescribeSlice(const traces::Trace& trace,
                                                               uint32_t slice, int64_t origin_ns);

//! Achieved rate of a slice: TFLOP/s when it has FLOPs, else GB/s (algbw) when it has bytes; < 0:
//! none.
struct Throughput {
  double tflops = -1;
  double gbps = -1;
};
Throughput ThroughputOf(const traces::Trace& trace, const traces::Slice& s);

//! Flows (send -> recv, launch -> kernel) with an end inside `slice` (same track, within its
//! time span), as indices into Trace::flows().
std::vector<size_t> FlowsOfSlice(const traces::Trace& trace, uint32_t slice);

struct NameAggregate {
  std::string name;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t mean_ns = 0;
  int64_t p50_ns = 0;
  int64_t p99_ns = 0;
};

//! Slices of `rows` that overlap [t0_ns, t1_ns], aggregated per name (durations of whole slices),
//! sorted by total time, largest first.
std::vector<NameAggregate> AggregateRange(const traces::Trace& trace, const TimelineIndex& index,
                                          const std::vector<size_t>& rows, int64_t t0_ns,
                                          int64_t t1_ns);

//! A counter value for display: bytes in binary units ("9 GiB", "512 MiB") when the counter's
//! name or series speaks of bytes or memory, else three significant digits.
std::string FormatCounterValue(std::string_view name, std::string_view series, double value);

//! Name search by regular expression (ECMAScript, case-insensitive).
class SliceSearch {
 public:
  //! Returns an error message for a bad pattern (and clears the search), else "".
  std::string Set(const traces::Trace& trace, const std::string& pattern);
  void Clear();
  bool active() const { return !matches_.empty() || !pattern_.empty(); }
  bool IsMatch(traces::StringId name) const {
    return name < name_match_.size() && name_match_[name] != 0;
  }
  //! Matching slices by start time.
  const std::vector<uint32_t>& matches() const { return matches_; }
  //! The first match starting after `t_ns` (wrapping), or the last one before it; -1 when none.
  int64_t Next(const traces::Trace& trace, int64_t t_ns) const;
  int64_t Previous(const traces::Trace& trace, int64_t t_ns) const;

 private:
  std::string pattern_;
  std::vector<uint8_t> name_match_;  // by StringId
  std::vector<uint32_t> matches_;
};

}  // namespace parallax::gui
