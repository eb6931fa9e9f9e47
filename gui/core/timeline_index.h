#pragma once
// The timeline's row layout and level-of-detail index over a Trace (Tracy's idea: the data core
// answers "what to draw in this pixel range" in time bounded by the pixels, not the slices).
//
// Lanes: one group per rank (or per process for tracks without a rank), in rank order. Rows: one
// per (track, nesting depth), tracks in stream order. A row's slices never overlap, so their
// starts and ends are both sorted: a binary search finds the first visible slice and the LOD walk
// jumps over every run of sub-pixel slices with one more search. Memory: 4 bytes per slice
// (a row holds slice indices into the Trace) plus one counter row per counter series.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace parallax::gui {

//! Summary of a group of consecutive slices of a row: where it starts and ends, its widest
//! slice and widest gap. When both are narrower than a pixel the group draws as one busy block.
struct SliceGroup {
  int64_t first_start_ns = 0;
  int64_t last_end_ns = 0;
  int32_t max_dur_ns = 0;  //!< saturates at INT32_MAX
  int32_t max_gap_ns = 0;  //!< between consecutive slices; saturates at INT32_MAX
};

//! Group sizes of the summary levels: 16, 512 and 16384 slices (0.05 + 0.05 + 1.5 bytes/slice).
inline constexpr int kGroupShift[] = {4, 9, 14};

struct TimelineRow {
  traces::TrackId track = 0;
  int depth = 0;
  std::vector<uint32_t> slices;  //!< indices into Trace::slices(), by start; non-overlapping
  std::vector<SliceGroup> groups[std::size(kGroupShift)];  //!< per level, by group
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
  static std::optional<TimelineIndex> Build(const traces::Trace& trace,
                                            const std::atomic<bool>* cancel = nullptr);

  const std::vector<TimelineRow>& rows() const { return rows_; }
  const std::vector<CounterRow>& counter_rows() const { return counter_rows_; }
  const std::vector<Lane>& lanes() const { return lanes_; }
  int64_t first_ns() const { return first_ns_; }
  int64_t last_ns() const { return last_ns_; }
  size_t slice_count() const { return slice_count_; }

  //! Calls fn(const DrawBox&) for the slices of `row` overlapping [t0_ns, t1_ns], merging runs of
  //! slices shorter than `ns_per_px` into busy blocks. At most ~2 boxes per pixel, O(log n) each.
  template <class F>
  void Visit(const traces::Trace& trace, size_t row, int64_t t0_ns, int64_t t1_ns, double ns_per_px,
             F&& fn) const;

  //! The slice of `row` under `t_ns`, else the nearest one within `slop_ns`.
  std::optional<uint32_t> HitTest(const traces::Trace& trace, size_t row, int64_t t_ns,
                                  int64_t slop_ns) const;
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
void TimelineIndex::Visit(const traces::Trace& trace, size_t row, int64_t t0_ns, int64_t t1_ns,
                          double ns_per_px, F&& fn) const {
  const TimelineRow& r = rows_[row];
  const auto& ids = r.slices;
  const auto& slices = trace.slices();
  const size_t n = ids.size();
  const auto px = static_cast<int64_t>(ns_per_px > 1 ? ns_per_px : 1);
  size_t i = FirstEndingAfter(trace, row, t0_ns);
  while (i < n) {
    // Coarsest summary group around i whose slices and gaps are all sub-pixel: one busy block
    // from slice i to the group's end (the rest of a dense group is dense too).
    bool skipped = false;
    for (size_t lv = std::size(kGroupShift); lv-- > 0;) {
      const SliceGroup& g = r.groups[lv][i >> kGroupShift[lv]];
      if (g.max_dur_ns < px && g.max_gap_ns < px) {
        const size_t end = std::min(n, ((i >> kGroupShift[lv]) + 1) << kGroupShift[lv]);
        const int64_t start = i == ((i >> kGroupShift[lv]) << kGroupShift[lv])
                                  ? g.first_start_ns
                                  : slices[ids[i]].start_ns;
        if (start > t1_ns) return;
        fn(DrawBox{start, std::max(g.last_end_ns, start + px), ids[i],
                   static_cast<uint32_t>(end - i)});
        i = end;
        skipped = true;
        break;
      }
    }
    if (skipped) continue;
    const traces::Slice& s = slices[ids[i]];
    if (s.start_ns > t1_ns) break;
    if (s.dur_ns >= px) {
      fn(DrawBox{s.start_ns, s.end_ns(), ids[i], 1});
      ++i;
      continue;
    }
    // A sub-pixel slice: merge every slice starting within one pixel of it. Galloping search
    // from i: the run is short and near in memory, so this stays O(log run) and cache-friendly.
    const int64_t limit = s.start_ns + px;
    size_t step = 1, lo = i + 1, hi = i + 1;
    while (hi < n && slices[ids[hi]].start_ns < limit) {
      lo = hi + 1;
      hi = std::min(n, i + 1 + (step *= 2));
    }
    hi = std::min(hi, n);
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (slices[ids[mid]].start_ns < limit)
        lo = mid + 1;
      else
        hi = mid;
    }
    size_t j = lo;                                          // [i, j) start within the pixel
    if (j - i > 1 && slices[ids[j - 1]].dur_ns >= px) --j;  // a wide last one is drawn alone
    const traces::Slice& last = slices[ids[j - 1]];
    fn(DrawBox{s.start_ns, std::max(last.end_ns(), s.start_ns + px), ids[i],
               static_cast<uint32_t>(j - i)});
    i = j;
  }
}

}  // namespace parallax::gui
