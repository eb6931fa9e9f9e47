#pragma once
// The timeline's row layout and level-of-detail index over a Trace (Tracy's idea: the data core
// answers "what to draw in this pixel range" in time bounded by the pixels, not the slices).
//
// Lanes: one group per rank (or per process for tracks without a rank), in rank order. Rows: one
// per (track, nesting depth), tracks in stream order. A row's slices never overlap, so their
// starts and ends are both sorted: a binary search finds the first visible slice and the LOD walk
// jumps over every run of sub-pixel slices with one more search. Memory: 4 bytes per slice
// (a row holds slice indices into the Trace) plus one counter row per counter series.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace parallax::gui {

struct TimelineRow {
  traces::TrackId track = 0;
  int depth = 0;
  std::vector<uint32_t> slices;  //!< indices into Trace::slices(), by start; non-overlapping
};

//! One counter series of one process, drawn as an area chart.
struct CounterRow {
  int64_t pid = 0;
  traces::StringId name = traces::kEmptyString;
  traces::StringId series = traces::kEmptyString;
  std::vector<uint32_t> samples;  //!< indices into Trace::counters(), by time
  double max_value = 0;
};

//! A rank's (or process's) group of rows.
struct Lane {
  int64_t key = 0;           //!< rank, or pid when the tracks have no rank
  std::string label;         //!< "rank 3", or the process name
  std::vector<size_t> rows;  //!< TimelineRow indices, in display order
  std::vector<size_t> counter_rows;
};

//! What to draw for part of a row: one slice, or a merged run of sub-pixel slices.
struct DrawBox {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t slice = 0;  //!< the (first) slice
  uint32_t count = 1;  //!< > 1: a busy block of `count` slices narrower than a pixel each
};

class TimelineIndex {
 public:
  //! Builds the layout; returns nullopt only when `cancel` became true.
  static std::optional<TimelineIndex> Build(const traces::Trace& trace, const std::atomic<bool>* cancel = nullptr);

  const std::vector<TimelineRow>& rows() const { return rows_; }
  const std::vector<CounterRow>& counter_rows() const { return counter_rows_; }
  const std::vector<Lane>& lanes() const { return lanes_; }
  int64_t first_ns() const { return first_ns_; }
  int64_t last_ns() const { return last_ns_; }
  size_t slice_count() const { return slice_count_; }

  //! Calls fn(const DrawBox&) for the slices of `row` overlapping [t0_ns, t1_ns], merging runs of
  //! slices shorter than `ns_per_px` into busy blocks. At most ~2 boxes per pixel, O(log n) each.
  template <class F>
  void Visit(const traces::Trace& trace, size_t row, int64_t t0_ns, int64_t t1_ns, double ns_per_px, F&& fn) const;

  //! The slice of `row` under `t_ns`, else the nearest one within `slop_ns`.
  std::optional<uint32_t> HitTest(const traces::Trace& trace, size_t row, int64_t t_ns, int64_t slop_ns) const;
  //! First position in row.slices whose slice ends after t_ns.
  size_t FirstEndingAfter(const traces::Trace& trace, size_t row, int64_t t_ns) const;
  //! The row holding a slice (binary search over the rows of its track), or nullopt.
  std::optional<size_t> RowOfSlice(const traces::Trace& trace, uint32_t slice) const;
  //! Depth-0 row of a track, or nullopt.
  std::optional<size_t> TopRowOfTrack(traces::TrackId track) const;

  size_t MemoryBytes() const;

 private:
  std::vector<TimelineRow> rows_;
  std::vector<CounterRow> counter_rows_;
  std::vector<Lane> lanes_;
  std::vector<std::vector<size_t>> rows_of_track_;  // by depth
  int64_t first_ns_ = 0, last_ns_ = 0;
  size_t slice_count_ = 0;
};

template <class F>
void TimelineIndex::Visit(const traces::Trace& trace, size_t row, int64_t t0_ns, int64_t t1_ns, double ns_per_px,
                          F&& fn) const {
  const auto& ids = rows_[row].slices;
  const auto& slices = trace.slices();
  const size_t n = ids.size();
  const auto px = static_cast<int64_t>(ns_per_px > 1 ? ns_per_px : 1);
  size_t i = FirstEndingAfter(trace, row, t0_ns);
  while (i < n) {
    const traces::Slice& s = slices[ids[i]];
    if (s.start_ns > t1_ns) break;
    if (s.dur_ns >= px) {
      fn(DrawBox{s.start_ns, s.end_ns(), ids[i], 1});
      ++i;
      continue;
    }
    // A sub-pixel slice: merge every slice starting within one pixel of it.
    const int64_t limit = s.start_ns + px;
    size_t lo = i + 1, hi = n;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (slices[ids[mid]].start_ns < limit) lo = mid + 1; else hi = mid;
    }
    size_t j = lo;  // [i, j) start within the pixel
    if (j - i > 1 && slices[ids[j - 1]].dur_ns >= px) --j;  // a wide last one is drawn alone
    const traces::Slice& last = slices[ids[j - 1]];
    fn(DrawBox{s.start_ns, std::max(last.end_ns(), s.start_ns + px), ids[i], static_cast<uint32_t>(j - i)});
    i = j;
  }
}

}  // namespace parallax::gui
