#pragma once
// Trace statistics: counts and busy time per track and per category, a per-name duration table
// (count, total, mean, p50, p99), and per rank the compute / communication / idle breakdown with
// the share of communication overlapped by compute (Holistic Trace Analysis' temporal breakdown
// and comm-comp overlap, computed on device streams).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/json_io.h"
#include "traces/trace.h"

namespace parallax::traces {

struct TrackStats {
  int64_t pid = 0, tid = 0, rank = -1;
  std::string name, process_name;
  Stream stream = Stream::kOther;
  int64_t slices = 0;
  int64_t busy_ns = 0;  //!< union of the track's slices
};

struct CategoryStats {
  int64_t count = 0;
  int64_t total_ns = 0;  //!< sum of durations
};

struct NameStats {
  std::string name;
  int64_t count = 0, total_ns = 0, mean_ns = 0, p50_ns = 0, p99_ns = 0, max_ns = 0;
};

//! Device time of one rank between its first and last device slice.
struct RankBreakdown {
  int64_t rank = 0;
  int64_t span_ns = 0;
  int64_t compute_ns = 0;  //!< union of compute slices
  int64_t comm_ns = 0;     //!< union of communication slices
  int64_t memory_ns = 0;   //!< union of memcpy/memset slices
  int64_t idle_ns = 0;     //!< span minus the union of all device slices
  int64_t overlap_ns = 0;  //!< communication time during which compute also runs
  double overlap_ratio = 0;  //!< overlap_ns / comm_ns (0 without communication)
};

struct TraceStats {
  int64_t slices = 0;
  int64_t instants = 0;
  int64_t flows = 0;
  int64_t counters = 0;
  int64_t first_ns = 0, last_ns = 0;
  std::vector<TrackStats> tracks;
  std::map<std::string, CategoryStats> categories;
  int64_t distinct_names = 0;
  std::vector<NameStats> names;  //!< top entries by total time
  std::vector<RankBreakdown> per_rank;
};

struct StatsOptions {
  size_t top_names = 20;
};

TraceStats ComputeStats(const Trace& trace, const StatsOptions& options = {});
//! Keys: slices, instants, flows, counters, first_ns, last_ns, tracks, categories
//! (name -> {count, total_ns}), per_rank ([{rank, compute_ns, comm_ns, memory_ns, idle_ns,
//! span_ns, overlap_ratio}]), distinct_names, names ([{name, count, total_ns, mean_ns, p50_ns,
//! p99_ns, max_ns}]).
Json StatsToJson(const TraceStats& stats);
//! Human-readable tables.
std::string FormatStats(const TraceStats& stats);

//! Nearest-rank percentile (p in [0, 100]) of sorted values; 0 for none.
int64_t Percentile(const std::vector<int64_t>& sorted, double p);

}  // namespace parallax::traces
