#include "gui/core/timeline_index.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <tuple>

namespace parallax::gui {
namespace {

constexpr int kMaxDepth = 63;  // deeper nesting is drawn on the last row

bool Cancelled(const std::atomic<bool>* cancel) {
  return cancel && cancel->load(std::memory_order_relaxed);
}

int32_t Saturate(int64_t v) { return static_cast<int32_t>(std::min<int64_t>(v, INT32_MAX)); }

//! Adds the slice at position `pos` of a row to the row's finest summary level.
void AddToFinestGroup(std::vector<SliceGroup>& fine, size_t pos, const traces::Slice& s,
                      int64_t& prev_end) {
  if ((pos & ((size_t{1} << kGroupShift[0]) - 1)) == 0) {
    fine.push_back(SliceGroup{s.start_ns, s.end_ns(), Saturate(s.dur_ns), 0});
  } else {
    SliceGroup& g = fine.back();
    g.last_end_ns = s.end_ns();
    g.max_dur_ns = std::max(g.max_dur_ns, Saturate(s.dur_ns));
    g.max_gap_ns = std::max(g.max_gap_ns, Saturate(s.start_ns - prev_end));
  }
  prev_end = s.end_ns();
}

//! Runs fn(i) for i in [0, n) on one thread per core; items are taken in order, one at a time
//! (tracks and rows are few and large).
template <class F>
void ParallelFor(size_t n, F&& fn) {
  const size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < threads; ++k) pool.emplace_back(run);
  run();
  for (std::thread& t : pool) t.join();
}

//! The coarser summary levels of a row from its finest one.
void BuildCoarseGroups(TimelineRow& row) {
  for (size_t lv = 1; lv < std::size(kGroupShift); ++lv) {
    const auto& lower = row.groups[lv - 1];
    auto& upper = row.groups[lv];
    const size_t per = size_t{1} << (kGroupShift[lv] - kGroupShift[lv - 1]);
    upper.resize((lower.size() + per - 1) / per);
    for (size_t k = 0; k < lower.size(); ++k) {
      SliceGroup& u = upper[k / per];
      const SliceGroup& l = lower[k];
      if (k % per == 0) {
        u = l;
      } else {
        u.max_gap_ns =
            std::max({u.max_gap_ns, l.max_gap_ns, Saturate(l.first_start_ns - u.last_end_ns)});
        u.max_dur_ns = std::max(u.max_dur_ns, l.max_dur_ns);
        u.last_end_ns = l.last_end_ns;
      }
    }
  }
}

}  // namespace

std::optional<TimelineIndex> TimelineIndex::Build(const traces::Trace& trace,
                                                  const std::atomic<bool>* cancel) {
  TimelineIndex ix;
  const auto& slices = trace.slices();
  const size_t n = slices.size();
  const size_t tracks = trace.tracks().size();
  ix.slice_count_ = n;
  ix.first_ns_ = trace.first_ns();
  ix.last_ns_ = trace.last_ns();

  // 1. Bucket slice indices by track (counting sort keeps the file order inside a track).
  std::vector<uint32_t> begin(tracks + 1, 0);
  slices.ForEach([&](const traces::Slice& s) { ++begin[s.track + 1]; });
  for (size_t t = 0; t < tracks; ++t) begin[t + 1] += begin[t];
  std::vector<uint32_t> order(n);
  {
    std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
    uint32_t i = 0;
    slices.ForEach([&](const traces::Slice& s) { order[fill[s.track]++] = i++; });
  }
  if (Cancelled(cancel)) return std::nullopt;

  // 2. Per track: nesting depths with a stack of open ends, counts and the finest summary level
  //    per depth, in one pass. Tracks come sorted by (start, longer first) from our writer and
  //    Kineto; a track found out of order is sorted and walked again.
  auto before = [&](uint32_t x, uint32_t y) {
    const traces::Slice& a = slices[x];
    const traces::Slice& b = slices[y];
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.dur_ns > b.dur_ns;
  };
  std::vector<uint8_t> depth(n);
  std::vector<std::vector<uint32_t>> per_depth_count(tracks);
  std::vector<std::vector<std::vector<SliceGroup>>> per_depth_groups(tracks);
  // Tracks are independent (disjoint ranges of `order` and `depth`): one per core at a time.
  ParallelFor(tracks, [&](size_t t) {
    if (Cancelled(cancel)) return;
    std::vector<int64_t> open_ends, prev_end;
    for (int attempt = 0; attempt < 2; ++attempt) {
      open_ends.clear();
      prev_end.clear();
      auto& counts = per_depth_count[t];
      auto& groups = per_depth_groups[t];
      counts.clear();
      groups.clear();
      bool sorted = true;
      for (uint32_t p = begin[t]; p < begin[t + 1]; ++p) {
        if (attempt == 0 && p > begin[t] && before(order[p], order[p - 1])) {
          sorted = false;
          break;
        }
        const traces::Slice& s = slices[order[p]];
        while (!open_ends.empty() && open_ends.back() <= s.start_ns) open_ends.pop_back();
        const int d = std::min<int>(static_cast<int>(open_ends.size()), kMaxDepth);
        if (static_cast<int>(open_ends.size()) < kMaxDepth) open_ends.push_back(s.end_ns());
        depth[p] = static_cast<uint8_t>(d);
        const auto du = static_cast<size_t>(d);
        if (counts.size() <= du) {
          counts.resize(du + 1, 0);
          groups.resize(du + 1);
          prev_end.resize(du + 1, 0);
        }
        AddToFinestGroup(groups[du], counts[du], s, prev_end[du]);
        ++counts[du];
      }
      if (sorted) break;
      std::sort(order.begin() + begin[t], order.begin() + begin[t + 1], before);
    }
  });
  if (Cancelled(cancel)) return std::nullopt;

  // 3. Rows with exact capacity (no growth slack: the index stays at 4 bytes per slice).
  ix.rows_of_track_.resize(tracks);
  for (size_t t = 0; t < tracks; ++t) {
    for (size_t d = 0; d < per_depth_count[t].size(); ++d) {
      ix.rows_of_track_[t].push_back(ix.rows_.size());
      TimelineRow row;
      row.track = static_cast<traces::TrackId>(t);
      row.depth = static_cast<int>(d);
      row.slices.reserve(per_depth_count[t][d]);
      row.groups[0] = std::move(per_depth_groups[t][d]);
      row.groups[0].shrink_to_fit();
      ix.rows_.push_back(std::move(row));
    }
  }
  ParallelFor(tracks, [&](size_t t) {  // a track fills only its own rows
    for (uint32_t p = begin[t]; p < begin[t + 1]; ++p)
      ix.rows_[ix.rows_of_track_[t][depth[p]]].slices.push_back(order[p]);
  });
  std::vector<uint32_t>().swap(order);
  std::vector<uint8_t>().swap(depth);
  if (Cancelled(cancel)) return std::nullopt;
  ParallelFor(ix.rows_.size(), [&](size_t r) { BuildCoarseGroups(ix.rows_[r]); });
  if (Cancelled(cancel)) return std::nullopt;

  // 4. Counter series per (pid, name, series), by time.
  std::map<std::tuple<int64_t, traces::StringId, traces::StringId>, size_t> counter_of;
  const auto& counters = trace.counters();
  for (size_t i = 0; i < counters.size(); ++i) {
    const auto& c = counters[i];
    const int64_t pid = trace.track(c.track).pid;
    auto [it, fresh] = counter_of.try_emplace({pid, c.name, c.series}, ix.counter_rows_.size());
    if (fresh) ix.counter_rows_.push_back({pid, c.name, c.series, {}, 0});
    auto& row = ix.counter_rows_[it->second];
    row.samples.push_back(static_cast<uint32_t>(i));
    row.max_value = std::max(row.max_value, c.value);
  }
  for (auto& row : ix.counter_rows_) {
    std::stable_sort(row.samples.begin(), row.samples.end(),
                     [&](uint32_t a, uint32_t b) { return counters[a].ts_ns < counters[b].ts_ns; });
  }

  // 5. Lanes: ranks first (by rank), then processes without a rank (by pid); inside a lane the
  //    tracks in stream order, then sort index, then tid.
  using LaneKey = std::pair<int, int64_t>;  // (0: rank / 1: pid, value)
  auto lane_key_of = [&](const traces::Track& tr) {
    return tr.rank >= 0 ? LaneKey{0, tr.rank} : LaneKey{1, tr.pid};
  };
  std::map<LaneKey, std::vector<traces::TrackId>> lane_tracks;
  for (size_t t = 0; t < tracks; ++t) {
    if (ix.rows_of_track_[t].empty()) continue;
    lane_tracks[lane_key_of(trace.track(static_cast<traces::TrackId>(t)))].push_back(
        static_cast<traces::TrackId>(t));
  }
  std::map<int64_t, std::vector<size_t>> counters_of_pid;
  for (size_t r = 0; r < ix.counter_rows_.size(); ++r)
    counters_of_pid[ix.counter_rows_[r].pid].push_back(r);
  for (auto& [key, ids] : lane_tracks) {
    std::sort(ids.begin(), ids.end(), [&](traces::TrackId a, traces::TrackId b) {
      const auto& x = trace.track(a);
      const auto& y = trace.track(b);
      return std::tuple(static_cast<int>(x.stream), x.sort_index, x.pid, x.tid) <
             std::tuple(static_cast<int>(y.stream), y.sort_index, y.pid, y.tid);
    });
    Lane lane;
    lane.key = key.second;
    const auto& first = trace.track(ids.front());
    if (key.first == 0) {
      lane.label = "rank " + std::to_string(key.second);
    } else {
      lane.label =
          first.process_name.empty() ? "pid " + std::to_string(first.pid) : first.process_name;
    }
    for (traces::TrackId t : ids) {
      for (size_t r : ix.rows_of_track_[t]) lane.rows.push_back(r);
      if (auto it = counters_of_pid.find(trace.track(t).pid); it != counters_of_pid.end()) {
        lane.counter_rows.insert(lane.counter_rows.end(), it->second.begin(), it->second.end());
        counters_of_pid.erase(it);
      }
    }
    ix.lanes_.push_back(std::move(lane));
  }
  return ix;
}

size_t TimelineIndex::FirstEndingAfter(const traces::Trace& trace, size_t row, int64_t t_ns) const {
  const auto& ids = rows_[row].slices;
  const auto& slices = trace.slices();
  size_t lo = 0, hi = ids.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (slices[ids[mid]].end_ns() < t_ns)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

std::optional<uint32_t> TimelineIndex::HitTest(const traces::Trace& trace, size_t row, int64_t t_ns,
                                               int64_t slop_ns) const {
  const auto& ids = rows_[row].slices;
  if (ids.empty()) return std::nullopt;
  const size_t p = FirstEndingAfter(trace, row, t_ns);
  std::optional<uint32_t> best;
  int64_t best_gap = slop_ns + 1;
  auto consider = [&](size_t i) {
    if (i >= ids.size()) return;
    const traces::Slice& s = trace.slice(ids[i]);
    const int64_t gap = t_ns < s.start_ns   ? s.start_ns - t_ns
                        : t_ns > s.end_ns() ? t_ns - s.end_ns()
                                            : 0;
    if (gap < best_gap) best_gap = gap, best = ids[i];
  };
  consider(p);
  if (p > 0) consider(p - 1);
  return best;
}

std::optional<size_t> TimelineIndex::RowOfSlice(const traces::Trace& trace, uint32_t slice) const {
  const traces::Slice& s = trace.slice(slice);
  if (s.track >= rows_of_track_.size()) return std::nullopt;
  for (size_t r : rows_of_track_[s.track]) {
    const auto& ids = rows_[r].slices;
    auto it = std::lower_bound(ids.begin(), ids.end(), s.start_ns, [&](uint32_t id, int64_t t) {
      return trace.slice(id).start_ns < t;
    });
    for (; it != ids.end() && trace.slice(*it).start_ns == s.start_ns; ++it) {
      if (*it == slice) return r;
    }
  }
  return std::nullopt;
}

std::optional<size_t> TimelineIndex::TopRowOfTrack(traces::TrackId track) const {
  if (track >= rows_of_track_.size() || rows_of_track_[track].empty()) return std::nullopt;
  return rows_of_track_[track].front();
}

size_t TimelineIndex::MemoryBytes() const {
  size_t b =
      sizeof(*this) + rows_.capacity() * sizeof(TimelineRow) + lanes_.capacity() * sizeof(Lane);
  for (const auto& r : rows_) {
    b += r.slices.capacity() * sizeof(uint32_t);
    for (const auto& g : r.groups) b += g.capacity() * sizeof(SliceGroup);
  }
  for (const auto& r : counter_rows_)
    b += sizeof(CounterRow) + r.samples.capacity() * sizeof(uint32_t);
  for (const auto& l : lanes_) b += l.rows.capacity() * sizeof(size_t) + l.label.capacity();
  for (const auto& t : rows_of_track_) b += sizeof(std::vector<size_t>) + t.capacity() * sizeof(size_t);
  return b;
}

}  // namespace parallax::gui
