#include "gui/core/selection.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <regex>
#include <unordered_map>

#include "gui/core/time_axis.h"
#include "traces/stats.h"

namespace parallax::gui {

Throughput ThroughputOf(const traces::Trace& trace, const traces::Slice& s) {
  Throughput t;
  const traces::SliceArgs* a = trace.args(s);
  if (!a || s.dur_ns <= 0) return t;
  const double secs = static_cast<double>(s.dur_ns) * 1e-9;
  if (a->flops > 0) t.tflops = a->flops / secs / 1e12;
  if (a->bytes > 0) t.gbps = static_cast<double>(a->bytes) / secs / 1e9;
  return t;
}

std::vector<std::pair<std::string, std::string>> DescribeSlice(const traces::Trace& trace,
                                                               uint32_t slice, int64_t origin_ns) {
  std::vector<std::pair<std::string, std::string>> out;
  const traces::Slice& s = trace.slice(slice);
  const traces::Track& tr = trace.track(s.track);
  out.emplace_back("name", std::string(trace.Str(s.name)));
  if (s.category != traces::kEmptyString)
    out.emplace_back("category", std::string(trace.Str(s.category)));
  out.emplace_back("track",
                   (tr.process_name.empty() ? "pid " + std::to_string(tr.pid) : tr.process_name) +
                       " / " + (tr.name.empty() ? traces::ToString(tr.stream) : tr.name));
  if (auto id = trace.identity(s)) {
    out.emplace_back("step", std::to_string(id->step));
    out.emplace_back("rank", std::to_string(id->rank));
    if (id->microbatch >= 0) out.emplace_back("micro-batch", std::to_string(id->microbatch));
    if (id->stage >= 0) out.emplace_back("stage", std::to_string(id->stage));
    if (id->layer >= 0) out.emplace_back("layer", std::to_string(id->layer));
    out.emplace_back("op", ToString(id->op));
    out.emplace_back("phase", ToString(id->phase));
  }
  out.emplace_back("start", FormatDuration(static_cast<double>(s.start_ns - origin_ns)));
  out.emplace_back("duration", FormatDuration(static_cast<double>(s.dur_ns)));
  char buf[64];
  if (const traces::SliceArgs* a = trace.args(s)) {
    if (a->flops >= 0)
      std::snprintf(buf, sizeof buf, "%.4g", a->flops), out.emplace_back("FLOPs", buf);
    if (a->bytes >= 0) out.emplace_back("bytes", std::to_string(a->bytes));
    if (a->group_size > 0) out.emplace_back("group size", std::to_string(a->group_size));
    if (a->collective != traces::kEmptyString)
      out.emplace_back("collective", std::string(trace.Str(a->collective)));
  }
  const Throughput t = ThroughputOf(trace, s);
  if (t.tflops >= 0)
    std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", t.tflops), out.emplace_back("achieved", buf);
  else if (t.gbps >= 0)
    std::snprintf(buf, sizeof buf, "%.1f GB/s (algbw)", t.gbps), out.emplace_back("achieved", buf);
  return out;
}

std::string FormatCounterValue(std::string_view name, std::string_view series, double value) {
  auto has = [](std::string_view s, std::string_view w) {
    return std::search(s.begin(), s.end(), w.begin(), w.end(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == b;
           }) != s.end();
  };
  char buf[48];
  if (has(name, "byte") || has(series, "byte") || has(name, "memory") || has(series, "memory")) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = value;
    size_t u = 0;
    while (std::fabs(v) >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
    std::snprintf(buf, sizeof buf, "%.3g %s", v, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", value);
  }
  return buf;
}

std::vector<size_t> FlowsOfSlice(const traces::Trace& trace, uint32_t slice) {
  const traces::Slice& s = trace.slice(slice);
  auto inside = [&](traces::TrackId track, int64_t t) {
    return track == s.track && t >= s.start_ns && t <= s.end_ns();
  };
  std::vector<size_t> out;
  const auto& flows = trace.flows();
  for (size_t i = 0; i < flows.size(); ++i) {
    if (inside(flows[i].from_track, flows[i].from_ns) || inside(flows[i].to_track, flows[i].to_ns))
      out.push_back(i);
  }
  return out;
}

std::vector<NameAggregate> AggregateRange(const traces::Trace& trace, const TimelineIndex& index,
                                          const std::vector<size_t>& rows, int64_t t0_ns,
                                          int64_t t1_ns) {
  std::unordered_map<traces::StringId, std::vector<int64_t>> durations;
  for (size_t r : rows) {
    if (r >= index.rows().size()) continue;
    const auto& ids = index.rows()[r].slices;
    for (size_t i = index.FirstEndingAfter(trace, r, t0_ns); i < ids.size(); ++i) {
      const traces::Slice& s = trace.slice(ids[i]);
      if (s.start_ns > t1_ns) break;
      if (s.end_ns() == t0_ns && s.dur_ns > 0) continue;
      durations[s.name].push_back(s.dur_ns);
    }
  }
  std::vector<NameAggregate> out;
  out.reserve(durations.size());
  for (auto& [name, d] : durations) {
    std::sort(d.begin(), d.end());
    NameAggregate a;
    a.name = std::string(trace.Str(name));
    a.count = static_cast<int64_t>(d.size());
    for (int64_t v : d) a.total_ns += v;
    a.mean_ns = a.total_ns / a.count;
    a.p50_ns = traces::Percentile(d, 50);
    a.p99_ns = traces::Percentile(d, 99);
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](const NameAggregate& a, const NameAggregate& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

void SliceSearch::Clear() {
  pattern_.clear();
  name_match_.clear();
  matches_.clear();
}

std::string SliceSearch::Set(const traces::Trace& trace, const std::string& pattern) {
  Clear();
  if (pattern.empty()) return "";
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript | std::regex::icase | std::regex::optimize);
  } catch (const std::regex_error& e) {
    return "bad regular expression \"" + pattern + "\": " + e.what();
  }
  pattern_ = pattern;
  name_match_.assign(trace.strings().size(), 0);
  for (size_t i = 1; i < name_match_.size(); ++i) {
    const auto v = trace.Str(static_cast<traces::StringId>(i));
    name_match_[i] = std::regex_search(v.begin(), v.end(), re) ? 1 : 0;
  }
  uint32_t i = 0;
  trace.slices().ForEach([&](const traces::Slice& s) {
    if (IsMatch(s.name)) matches_.push_back(i);
    ++i;
  });
  std::stable_sort(matches_.begin(), matches_.end(), [&](uint32_t a, uint32_t b) {
    return trace.slice(a).start_ns < trace.slice(b).start_ns;
  });
  return "";
}

int64_t SliceSearch::Next(const traces::Trace& trace, int64_t t_ns) const {
  if (matches_.empty()) return -1;
  auto it = std::upper_bound(matches_.begin(), matches_.end(), t_ns,
                             [&](int64_t t, uint32_t id) { return t < trace.slice(id).start_ns; });
  return it == matches_.end() ? matches_.front() : *it;
}

int64_t SliceSearch::Previous(const traces::Trace& trace, int64_t t_ns) const {
  if (matches_.empty()) return -1;
  auto it = std::lower_bound(matches_.begin(), matches_.end(), t_ns,
                             [&](uint32_t id, int64_t t) { return trace.slice(id).start_ns < t; });
  return it == matches_.begin() ? matches_.back() : *(it - 1);
}

}  // namespace parallax::gui
