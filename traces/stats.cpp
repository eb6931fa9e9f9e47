#include "traces/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "traces/interval_set.h"

namespace parallax::traces {

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * n));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

TraceStats ComputeStats(const Trace& trace, const StatsOptions& options) {
  TraceStats st;
  st.flows = static_cast<int64_t>(trace.flows().size());
  st.counters = static_cast<int64_t>(trace.counters().size());
  st.first_ns = trace.first_ns();
  st.last_ns = trace.last_ns();

  const size_t ntracks = trace.tracks().size();
  std::vector<std::vector<Interval>> track_iv(ntracks);
  std::vector<int64_t> track_count(ntracks, 0);
  std::vector<CategoryStats> cat_stats(trace.strings().size());
  std::vector<bool> cat_seen(trace.strings().size(), false);
  std::vector<std::vector<int64_t>> name_durs(trace.strings().size());
  struct RankIv {
    std::vector<Interval> compute, comm, memory;
  };
  std::map<int64_t, RankIv> ranks;

  trace.slices().ForEach([&](const Slice& s) {
    if (s.has(slice_flags::kInstant)) {
      ++st.instants;
      return;
    }
    ++st.slices;
    ++track_count[s.track];
    track_iv[s.track].emplace_back(s.start_ns, s.end_ns());
    cat_seen[s.category] = true;
    ++cat_stats[s.category].count;
    cat_stats[s.category].total_ns += s.dur_ns;
    name_durs[s.name].push_back(s.dur_ns);
    const Track& t = trace.track(s.track);
    if (!t.device || t.rank < 0) return;
    if (s.has(slice_flags::kCompute)) ranks[t.rank].compute.emplace_back(s.start_ns, s.end_ns());
    if (s.has(slice_flags::kComm)) ranks[t.rank].comm.emplace_back(s.start_ns, s.end_ns());
    if (s.has(slice_flags::kMemory)) ranks[t.rank].memory.emplace_back(s.start_ns, s.end_ns());
  });

  for (size_t i = 0; i < ntracks; ++i) {
    const Track& t = trace.tracks()[i];
    TrackStats ts;
    ts.pid = t.pid;
    ts.tid = t.tid;
    ts.rank = t.rank;
    ts.name = t.name;
    ts.process_name = t.process_name;
    ts.stream = t.stream;
    ts.slices = track_count[i];
    Normalize(track_iv[i]);
    ts.busy_ns = TotalLength(track_iv[i]);
    st.tracks.push_back(std::move(ts));
  }
  for (size_t c = 0; c < cat_stats.size(); ++c) {
    if (cat_seen[c]) st.categories[std::string(trace.Str(static_cast<StringId>(c)))] = cat_stats[c];
  }
  for (size_t n = 0; n < name_durs.size(); ++n) {
    auto& d = name_durs[n];
    if (d.empty()) continue;
    ++st.distinct_names;
    std::sort(d.begin(), d.end());
    NameStats ns;
    ns.name = std::string(trace.Str(static_cast<StringId>(n)));
    ns.count = static_cast<int64_t>(d.size());
    for (int64_t v : d) ns.total_ns += v;
    ns.mean_ns = ns.total_ns / ns.count;
    ns.p50_ns = Percentile(d, 50);
    ns.p99_ns = Percentile(d, 99);
    ns.max_ns = d.back();
    st.names.push_back(std::move(ns));
    std::vector<int64_t>().swap(d);
  }
  std::sort(st.names.begin(), st.names.end(), [](const NameStats& a, const NameStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (st.names.size() > options.top_names) st.names.resize(options.top_names);

  for (auto& [rank, iv] : ranks) {
    Normalize(iv.compute);
    Normalize(iv.comm);
    Normalize(iv.memory);
    std::vector<Interval> all = iv.compute;
    all.insert(all.end(), iv.comm.begin(), iv.comm.end());
    all.insert(all.end(), iv.memory.begin(), iv.memory.end());
    Normalize(all);
    RankBreakdown rb;
    rb.rank = rank;
    if (!all.empty()) rb.span_ns = all.back().second - all.front().first;
    rb.compute_ns = TotalLength(iv.compute);
    rb.comm_ns = TotalLength(iv.comm);
    rb.memory_ns = TotalLength(iv.memory);
    rb.idle_ns = rb.span_ns - TotalLength(all);
    rb.overlap_ns = IntersectionLength(iv.compute, iv.comm);
    rb.overlap_ratio = rb.comm_ns > 0 ? static_cast<double>(rb.overlap_ns) / static_cast<double>(rb.comm_ns) : 0.0;
    st.per_rank.push_back(rb);
  }
  return st;
}

Json StatsToJson(const TraceStats& st) {
  Json j;
  j["slices"] = st.slices;
  j["instants"] = st.instants;
  j["flows"] = st.flows;
  j["counters"] = st.counters;
  j["first_ns"] = st.first_ns;
  j["last_ns"] = st.last_ns;
  j["tracks"] = Json::array();
  for (const TrackStats& t : st.tracks) {
    j["tracks"].push_back({{"pid", t.pid}, {"tid", t.tid}, {"rank", t.rank}, {"name", t.name},
                           {"process", t.process_name}, {"stream", ToString(t.stream)},
                           {"slices", t.slices}, {"busy_ns", t.busy_ns}});
  }
  j["categories"] = Json::object();
  for (const auto& [name, c] : st.categories) {
    j["categories"][name] = {{"count", c.count}, {"total_ns", c.total_ns}};
  }
  j["per_rank"] = Json::array();
  for (const RankBreakdown& r : st.per_rank) {
    j["per_rank"].push_back({{"rank", r.rank}, {"span_ns", r.span_ns}, {"compute_ns", r.compute_ns},
                             {"comm_ns", r.comm_ns}, {"memory_ns", r.memory_ns}, {"idle_ns", r.idle_ns},
                             {"overlap_ns", r.overlap_ns}, {"overlap_ratio", r.overlap_ratio}});
  }
  j["distinct_names"] = st.distinct_names;
  j["names"] = Json::array();
  for (const NameStats& n : st.names) {
    j["names"].push_back({{"name", n.name}, {"count", n.count}, {"total_ns", n.total_ns},
                          {"mean_ns", n.mean_ns}, {"p50_ns", n.p50_ns}, {"p99_ns", n.p99_ns},
                          {"max_ns", n.max_ns}});
  }
  return j;
}

namespace {

std::string Ms(int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3f", static_cast<double>(ns) / 1e6);
  return b;
}

std::string Us(int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3f", static_cast<double>(ns) / 1e3);
  return b;
}

std::string Clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

}  // namespace

std::string FormatStats(const TraceStats& st) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%lld slices, %lld instants, %lld flows, %lld counter samples, %zu tracks, span %s ms\n",
                static_cast<long long>(st.slices), static_cast<long long>(st.instants),
                static_cast<long long>(st.flows), static_cast<long long>(st.counters), st.tracks.size(),
                Ms(st.last_ns - st.first_ns).c_str());
  out += line;
  out += "\nTracks\n";
  std::snprintf(line, sizeof(line), "  %-12s %-10s %5s %-8s %-32s %10s %12s\n", "pid", "tid", "rank", "stream", "name",
                "slices", "busy_ms");
  out += line;
  for (const TrackStats& t : st.tracks) {
    std::snprintf(line, sizeof(line), "  %-12lld %-10lld %5lld %-8s %-32s %10lld %12s\n",
                  static_cast<long long>(t.pid), static_cast<long long>(t.tid), static_cast<long long>(t.rank),
                  ToString(t.stream), Clip(t.name, 32).c_str(), static_cast<long long>(t.slices), Ms(t.busy_ns).c_str());
    out += line;
  }
  out += "\nCategories\n";
  for (const auto& [name, c] : st.categories) {
    std::snprintf(line, sizeof(line), "  %-24s %10lld slices %14s ms\n", name.empty() ? "(none)" : Clip(name, 24).c_str(),
                  static_cast<long long>(c.count), Ms(c.total_ns).c_str());
    out += line;
  }
  if (!st.per_rank.empty()) {
    out += "\nPer rank (device streams)\n";
    std::snprintf(line, sizeof(line), "  %5s %12s %12s %12s %12s %12s %9s\n", "rank", "span_ms", "compute_ms",
                  "comm_ms", "memory_ms", "idle_ms", "overlap");
    out += line;
    for (const RankBreakdown& r : st.per_rank) {
      std::snprintf(line, sizeof(line), "  %5lld %12s %12s %12s %12s %12s %8.1f%%\n", static_cast<long long>(r.rank),
                    Ms(r.span_ns).c_str(), Ms(r.compute_ns).c_str(), Ms(r.comm_ns).c_str(), Ms(r.memory_ns).c_str(),
                    Ms(r.idle_ns).c_str(), 100.0 * r.overlap_ratio);
      out += line;
    }
  }
  std::snprintf(line, sizeof(line), "\nTop names by total time (%lld distinct)\n", static_cast<long long>(st.distinct_names));
  out += line;
  std::snprintf(line, sizeof(line), "  %-48s %9s %12s %10s %10s %10s\n", "name", "count", "total_ms", "mean_us", "p50_us",
                "p99_us");
  out += line;
  for (const NameStats& n : st.names) {
    std::snprintf(line, sizeof(line), "  %-48s %9lld %12s %10s %10s %10s\n", Clip(n.name, 48).c_str(),
                  static_cast<long long>(n.count), Ms(n.total_ns).c_str(), Us(n.mean_ns).c_str(), Us(n.p50_ns).c_str(),
                  Us(n.p99_ns).c_str());
    out += line;
  }
  return out;
}

}  // namespace parallax::traces
