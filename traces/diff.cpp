#include "traces/diff.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "model/step_time.h"

namespace parallax::traces {
namespace {

struct Entry {
  uint64_t a = 0, b = 0, c = 0;  // alignment key (exact: identity fields or a name id)
  int64_t start = 0;
  int64_t pid = 0, tid = 0;
  uint32_t idx = 0;
  bool operator<(const Entry& o) const {
    return std::tie(a, b, c, start, pid, tid, idx) < std::tie(o.a, o.b, o.c, o.start, o.pid, o.tid, o.idx);
  }
};

bool HasIdentities(const Trace& t) {
  for (size_t i = 0; i < t.slices().size(); ++i) {
    if (t.slice(i).has(slice_flags::kHasIdentity)) return true;
  }
  return false;
}

void IdentityKey(const PackedIdentity& id, int64_t step, Entry& e) {
  e.a = (static_cast<uint64_t>(static_cast<uint32_t>(step)) << 32) | static_cast<uint32_t>(id.rank);
  e.b = (static_cast<uint64_t>(static_cast<uint32_t>(id.microbatch)) << 32) |
        (static_cast<uint64_t>(static_cast<uint16_t>(id.stage)) << 16) | static_cast<uint16_t>(id.layer);
  e.c = (static_cast<uint64_t>(id.op) << 8) | id.phase;
}

double RelError(int64_t predicted, int64_t measured) {
  if (measured == 0) return 0.0;
  return static_cast<double>(predicted - measured) / static_cast<double>(measured);
}

std::string IdentityText(const PackedIdentity& p) {
  const OpIdentity id = p.Unpack();
  char b[160];
  std::snprintf(b, sizeof(b), "step=%lld rank=%lld mb=%lld stage=%lld layer=%lld %s %s",
                static_cast<long long>(id.step), static_cast<long long>(id.rank),
                static_cast<long long>(id.microbatch), static_cast<long long>(id.stage),
                static_cast<long long>(id.layer), ToString(id.op), ToString(id.phase));
  return b;
}

//! Span of the device slices (or of all slices when there are none).
int64_t DeviceSpan(const Trace& t) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  int64_t alo = lo, ahi = hi;
  t.slices().ForEach([&](const Slice& s) {
    if (s.has(slice_flags::kInstant)) return;
    alo = std::min(alo, s.start_ns);
    ahi = std::max(ahi, s.end_ns());
    if (s.flags & (slice_flags::kCompute | slice_flags::kComm | slice_flags::kMemory)) {
      lo = std::min(lo, s.start_ns);
      hi = std::max(hi, s.end_ns());
    }
  });
  if (hi >= lo) return hi - lo;
  return ahi >= alo ? ahi - alo : 0;
}

}  // namespace

const char* ToString(AlignMode m) { return m == AlignMode::kIdentity ? "identity" : "name-order"; }

std::vector<int64_t> StepsOf(const Trace& t) {
  std::set<int64_t> steps;  // a handful of steps over millions of slices
  for (size_t i = 0; i < t.slices().size(); ++i) {
    const Slice& s = t.slice(i);
    if (s.has(slice_flags::kHasIdentity)) steps.insert(s.identity.step);
  }
  return {steps.begin(), steps.end()};
}

namespace {

//! For each measured step compared, the predicted step it is compared with. `single_predicted`:
//! the predicted trace's step when it holds exactly one, else -1.
std::map<int64_t, int64_t> StepPairs(const Trace& predicted, const Trace& measured, const StepSelection& sel,
                                     int64_t& single_predicted) {
  const std::vector<int64_t> ps = StepsOf(predicted), ms = StepsOf(measured);
  single_predicted = ps.size() == 1 ? ps.front() : -1;
  std::map<int64_t, int64_t> pairs;  // measured step -> predicted step
  auto has = [](const std::vector<int64_t>& v, int64_t x) { return std::binary_search(v.begin(), v.end(), x); };
  if (ps.empty() || ms.empty()) return pairs;
  if (sel.measured_step >= 0) {
    if (!has(ms, sel.measured_step)) return pairs;
    if (ps.size() == 1) {
      pairs[sel.measured_step] = ps.front();
    } else if (has(ps, sel.measured_step)) {
      pairs[sel.measured_step] = sel.measured_step;
    }
    return pairs;
  }
  if (ps.size() == 1) {
    for (size_t i = ms.size() > 1 ? 1 : 0; i < ms.size(); ++i) pairs[ms[i]] = ps.front();
    return pairs;
  }
  for (int64_t s : ms) {
    if (has(ps, s)) pairs[s] = s;
  }
  return pairs;
}

}  // namespace

Alignment AlignSlices(const Trace& predicted, const Trace& measured, const StepSelection& sel) {
  Alignment al;
  al.mode = HasIdentities(predicted) && HasIdentities(measured) ? AlignMode::kIdentity : AlignMode::kNameOrder;
  const std::map<int64_t, int64_t> step_pairs =
      al.mode == AlignMode::kIdentity ? StepPairs(predicted, measured, sel, al.predicted_step)
                                      : std::map<int64_t, int64_t>{};
  // Predicted step -> the measured steps it is compared with (keys of the predicted entries).
  std::map<int64_t, std::vector<int64_t>> as_measured;
  for (const auto& [ms, ps] : step_pairs) as_measured[ps].push_back(ms);
  // Name-order mode keys names by the predicted trace's string ids; names only the measured trace
  // has get ids past the end of that table.
  std::vector<uint64_t> measured_name(measured.strings().size());
  uint64_t next = predicted.strings().size();
  for (size_t i = 0; i < measured_name.size(); ++i) {
    StringId id;
    measured_name[i] = predicted.strings().Find(measured.Str(static_cast<StringId>(i)), &id) ? id : next++;
  }
  auto collect = [&](const Trace& t, bool is_measured) {
    std::vector<Entry> v;
    v.reserve(t.slices().size());
    for (size_t i = 0; i < t.slices().size(); ++i) {
      const Slice& s = t.slice(i);
      if (s.has(slice_flags::kInstant)) continue;
      Entry e;
      e.start = s.start_ns;
      e.pid = t.track(s.track).pid;
      e.tid = t.track(s.track).tid;
      e.idx = static_cast<uint32_t>(i);
      if (al.mode == AlignMode::kIdentity) {
        if (!s.has(slice_flags::kHasIdentity)) continue;
        // Steps outside the selection are left out on both sides (not counted as unmatched);
        // a predicted step compared with several measured steps enters once per measured step.
        if (is_measured) {
          if (step_pairs.count(s.identity.step) == 0) continue;
          IdentityKey(s.identity, s.identity.step, e);
          v.push_back(e);
        } else {
          const auto it = as_measured.find(s.identity.step);
          if (it == as_measured.end()) continue;
          for (int64_t ms : it->second) {
            IdentityKey(s.identity, ms, e);
            v.push_back(e);
          }
        }
        continue;
      }
      e.a = is_measured ? measured_name[s.name] : s.name;
      v.push_back(e);
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  const std::vector<Entry> p = collect(predicted, false);
  const std::vector<Entry> m = collect(measured, true);
  size_t i = 0, j = 0;
  while (i < p.size() && j < m.size()) {
    if (p[i].a == m[j].a && p[i].b == m[j].b && p[i].c == m[j].c) {
      al.pairs.emplace_back(p[i].idx, m[j].idx);
      ++i;
      ++j;
    } else if (std::tie(p[i].a, p[i].b, p[i].c) < std::tie(m[j].a, m[j].b, m[j].c)) {
      ++al.only_predicted;
      ++i;
    } else {
      ++al.only_measured;
      ++j;
    }
  }
  al.only_predicted += static_cast<int64_t>(p.size() - i);
  al.only_measured += static_cast<int64_t>(m.size() - j);
  return al;
}

TraceDiff DiffTraces(const Trace& predicted, const Trace& measured, const DiffOptions& options) {
  const Alignment al = AlignSlices(predicted, measured, options.steps);
  TraceDiff d;
  d.mode = al.mode;
  d.matched = static_cast<int64_t>(al.pairs.size());
  d.only_predicted = al.only_predicted;
  d.only_measured = al.only_measured;

  std::map<std::pair<std::string, std::string>, OpDiff> per_op;
  struct Span {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    void Add(const Slice& s) {
      lo = std::min(lo, s.start_ns);
      hi = std::max(hi, s.end_ns());
    }
  };
  // Per (step, rank): ranks' clocks need not agree (other hosts, other time origins), so a step's
  // span is its slowest rank's, as `run` times a step.
  std::map<std::pair<int64_t, int64_t>, std::pair<Span, Span>> steps;
  std::vector<std::pair<int64_t, size_t>> by_abs;  // (|diff|, pair index)
  by_abs.reserve(al.pairs.size());
  for (size_t k = 0; k < al.pairs.size(); ++k) {
    const Slice& ps = predicted.slice(al.pairs[k].first);
    const Slice& ms = measured.slice(al.pairs[k].second);
    std::pair<std::string, std::string> key;
    if (al.mode == AlignMode::kIdentity) {
      key = {ToString(static_cast<OpKind>(ps.identity.op)), ToString(static_cast<Phase>(ps.identity.phase))};
      auto& spans = steps[{ms.identity.step, ms.identity.rank}];
      spans.first.Add(ps);
      spans.second.Add(ms);
    } else {
      key = {std::string(predicted.Str(ps.name)), ""};
    }
    OpDiff& o = per_op[key];
    ++o.matched;
    o.predicted_ns += ps.dur_ns;
    o.measured_ns += ms.dur_ns;
    by_abs.emplace_back(std::llabs(ps.dur_ns - ms.dur_ns), k);
  }
  for (auto& [key, o] : per_op) {
    o.op = key.first;
    o.phase = key.second;
    o.rel_error = RelError(o.predicted_ns, o.measured_ns);
    d.per_op.push_back(o);
  }
  std::sort(d.per_op.begin(), d.per_op.end(), [](const OpDiff& a, const OpDiff& b) {
    return a.measured_ns != b.measured_ns ? a.measured_ns > b.measured_ns : a.op < b.op;
  });

  if (al.mode == AlignMode::kIdentity) {
    // The compared steps already leave the warm-up step out (StepPairs): their median span.
    std::map<int64_t, std::pair<int64_t, int64_t>> slowest;  // step -> (predicted, measured) span
    for (const auto& [key, spans] : steps) {
      auto& [p, m] = slowest[key.first];
      p = std::max(p, spans.first.hi - spans.first.lo);
      m = std::max(m, spans.second.hi - spans.second.lo);
    }
    std::vector<int64_t> ps, ms;
    for (const auto& [step, span] : slowest) {
      ps.push_back(span.first);
      ms.push_back(span.second);
      d.measured_steps.push_back(step);
    }
    d.steps = static_cast<int64_t>(slowest.size());
    d.predicted_step = al.predicted_step;
    d.predicted_step_ns = Median(std::move(ps));
    d.measured_step_ns = Median(std::move(ms));
  } else {
    d.steps = 1;
    d.predicted_step_ns = DeviceSpan(predicted);
    d.measured_step_ns = DeviceSpan(measured);
  }
  d.step_time_error = RelError(d.predicted_step_ns, d.measured_step_ns);

  const size_t top = std::min(options.top, by_abs.size());
  std::partial_sort(by_abs.begin(), by_abs.begin() + static_cast<std::ptrdiff_t>(top), by_abs.end(),
                    [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t k = 0; k < top; ++k) {
    const auto [pi, mi] = al.pairs[by_abs[k].second];
    const Slice& ps = predicted.slice(pi);
    const Slice& ms = measured.slice(mi);
    Mismatch mm;
    if (al.mode == AlignMode::kIdentity) {
      mm.what = IdentityText(ps.identity);
    } else {
      // The k-th occurrence: count earlier pairs of the same name (pairs are grouped by name, in order).
      size_t first = by_abs[k].second;
      while (first > 0 && predicted.slice(al.pairs[first - 1].first).name == ps.name) --first;
      mm.what = std::string(predicted.Str(ps.name)) + " #" + std::to_string(by_abs[k].second - first);
    }
    mm.predicted_ns = ps.dur_ns;
    mm.measured_ns = ms.dur_ns;
    mm.rel_error = RelError(ps.dur_ns, ms.dur_ns);
    d.largest.push_back(std::move(mm));
  }
  return d;
}

Json DiffToJson(const TraceDiff& d) {
  Json j;
  j["alignment"] = ToString(d.mode);
  j["matched"] = d.matched;
  j["only_predicted"] = d.only_predicted;
  j["only_measured"] = d.only_measured;
  j["per_op"] = Json::array();
  for (const OpDiff& o : d.per_op) {
    j["per_op"].push_back({{"op", o.op}, {"phase", o.phase}, {"matched", o.matched},
                           {"predicted_ns", o.predicted_ns}, {"measured_ns", o.measured_ns},
                           {"rel_error", o.rel_error}});
  }
  j["step_time"] = {{"steps", d.steps}, {"measured_steps", d.measured_steps}, {"predicted_ns", d.predicted_step_ns},
                    {"measured_ns", d.measured_step_ns}, {"rel_error", d.step_time_error}};
  j["largest_mismatches"] = Json::array();
  for (const Mismatch& m : d.largest) {
    j["largest_mismatches"].push_back({{"what", m.what}, {"predicted_ns", m.predicted_ns},
                                       {"measured_ns", m.measured_ns}, {"rel_error", m.rel_error}});
  }
  return j;
}

std::string FormatDiff(const TraceDiff& d) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "alignment: %s; %lld matched, %lld only predicted, %lld only measured\n",
                ToString(d.mode), static_cast<long long>(d.matched), static_cast<long long>(d.only_predicted),
                static_cast<long long>(d.only_measured));
  out += line;
  std::snprintf(line, sizeof(line), "step time (%s, %lld step%s): predicted %.3f ms, measured %.3f ms, error %+.1f%%\n",
                d.mode == AlignMode::kIdentity ? "median step span" : "device span", static_cast<long long>(d.steps),
                d.steps == 1 ? "" : "s", static_cast<double>(d.predicted_step_ns) / 1e6,
                static_cast<double>(d.measured_step_ns) / 1e6, 100.0 * d.step_time_error);
  out += line;
  if (d.mode == AlignMode::kIdentity && !d.measured_steps.empty()) {
    std::string list;
    for (int64_t s : d.measured_steps) {
      if (!list.empty()) list += ',';
      list += std::to_string(s);
    }
    if (d.predicted_step >= 0) {
      std::snprintf(line, sizeof(line), "compared: predicted step %lld against measured step%s %s\n",
                    static_cast<long long>(d.predicted_step), d.measured_steps.size() == 1 ? "" : "s", list.c_str());
    } else {
      std::snprintf(line, sizeof(line), "compared: steps %s (equal step numbers)\n", list.c_str());
    }
    out += line;
  }
  out += "\nPer op\n";
  std::snprintf(line, sizeof(line), "  %-40s %-10s %9s %14s %14s %9s\n", "op", "phase", "matched", "predicted_ms",
                "measured_ms", "error");
  out += line;
  for (const OpDiff& o : d.per_op) {
    std::snprintf(line, sizeof(line), "  %-40.40s %-10s %9lld %14.3f %14.3f %+8.1f%%\n", o.op.c_str(), o.phase.c_str(),
                  static_cast<long long>(o.matched), static_cast<double>(o.predicted_ns) / 1e6,
                  static_cast<double>(o.measured_ns) / 1e6, 100.0 * o.rel_error);
    out += line;
  }
  out += "\nLargest mismatches\n";
  for (const Mismatch& m : d.largest) {
    std::snprintf(line, sizeof(line), "  %-64.64s predicted %12.3f us, measured %12.3f us (%+.1f%%)\n", m.what.c_str(),
                  static_cast<double>(m.predicted_ns) / 1e3, static_cast<double>(m.measured_ns) / 1e3,
                  100.0 * m.rel_error);
    out += line;
  }
  return out;
}

}  // namespace parallax::traces
