#include "traces/chrome_writer.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "traces/json_out.h"

namespace parallax::traces {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void WriteMetadata(JsonOut& out, const TraceMetadata& m) {
  out.Raw("\"otherData\":{");
  out.Key("trace_kind");
  out.Str(m.kind);
  out.Char(',');
  out.Key("tool_version");
  out.Str(m.tool_version);
  if (!m.source.empty()) {
    out.Char(',');
    out.Key("source");
    out.Str(m.source);
  }
  const std::pair<const char*, const Json*> objs[] = {{"plan", &m.plan}, {"model", &m.model},
                                                      {"cluster", &m.cluster}};
  for (const auto& [key, value] : objs) {
    if (value->is_null()) continue;
    out.Char(',');
    out.Key(key);
    out.Raw(value->dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  if (m.rank >= 0) {
    out.Char(',');
    out.Key("rank");
    out.Int(m.rank);
  }
  if (m.world_size >= 0) {
    out.Char(',');
    out.Key("world_size");
    out.Int(m.world_size);
  }
  if (!m.comm_progress.empty()) {
    out.Char(',');
    out.Key("comm_progress");
    out.Str(m.comm_progress);
  }
  out.Char('}');
}

class EventWriter {
 public:
  explicit EventWriter(JsonOut& out) : out_(out) {}

  //! Starts one event object: {"ph":"X","pid":..,"tid":..
  void Begin(char ph, int64_t pid, int64_t tid) {
    out_.Raw(first_ ? "\n{\"ph\":\"" : ",\n{\"ph\":\"");
    first_ = false;
    out_.Char(ph);
    out_.Raw("\",\"pid\":");
    out_.Int(pid);
    out_.Raw(",\"tid\":");
    out_.Int(tid);
  }
  void End() {
    out_.Char('}');
    out_.MaybeFlush();
  }
  void Meta(const char* name, int64_t pid, int64_t tid, const char* arg, std::string_view str) {
    Begin('M', pid, tid);
    out_.Raw(",\"name\":\"");
    out_.Raw(name);
    out_.Raw("\",\"args\":{");
    out_.Key(arg);
    out_.Str(str);
    out_.Char('}');
    End();
  }
  void MetaInt(const char* name, int64_t pid, int64_t tid, const char* arg, int64_t v) {
    Begin('M', pid, tid);
    out_.Raw(",\"name\":\"");
    out_.Raw(name);
    out_.Raw("\",\"args\":{");
    out_.Key(arg);
    out_.Int(v);
    out_.Char('}');
    End();
  }

 private:
  JsonOut& out_;
  bool first_ = true;
};

void WriteSliceArgs(JsonOut& out, const Trace& trace, const Slice& s,
                    const std::vector<std::string_view>& op_names) {
  const SliceArgs* a = trace.args(s);
  if (!s.has(slice_flags::kHasIdentity) && a == nullptr) return;
  out.Raw(",\"args\":{");
  bool first = true;
  auto sep = [&] {
    if (!first) out.Char(',');
    first = false;
  };
  if (s.has(slice_flags::kHasIdentity)) {
    const PackedIdentity& id = s.identity;
    out.Key("step");
    out.Int(id.step);
    out.Raw(",\"rank\":");
    out.Int(id.rank);
    out.Raw(",\"mb\":");
    out.Int(id.microbatch);
    out.Raw(",\"stage\":");
    out.Int(id.stage);
    out.Raw(",\"layer\":");
    out.Int(id.layer);
    out.Raw(",\"op\":\"");
    out.Raw(op_names[id.op]);
    out.Raw("\",\"phase\":\"");
    out.Raw(ToString(static_cast<Phase>(id.phase)));
    out.Char('"');
    first = false;
  }
  if (a != nullptr) {
    if (a->flops >= 0) {
      sep();
      out.Key("flops");
      out.Double(a->flops);
    }
    if (a->bytes >= 0) {
      sep();
      out.Key("bytes");
      out.Int(a->bytes);
    }
    if (a->group_size > 0) {
      sep();
      out.Key("group_size");
      out.Int(a->group_size);
    }
    if (a->collective != kEmptyString) {
      sep();
      out.Key("collective");
      out.Str(trace.Str(a->collective));
    }
  }
  out.Char('}');
}

}  // namespace

Status WriteChromeTrace(const Trace& trace, ByteSink& sink) {
  JsonOut out(sink);
  out.Raw("{\"kind\":\"trace\",\"version\":");
  out.Int(kTraceFormatVersion);
  out.Raw(",\"displayTimeUnit\":\"ns\",");
  WriteMetadata(out, trace.metadata);
  out.Raw(",\"traceEvents\":[");
  EventWriter ev(out);

  // Process and thread names with sort indices.
  std::set<int64_t> pids_done;
  for (const Track& t : trace.tracks()) {
    if (pids_done.insert(t.pid).second) {
      if (!t.process_name.empty()) ev.Meta("process_name", t.pid, 0, "name", t.process_name);
      ev.MetaInt("process_sort_index", t.pid, 0, "sort_index", t.rank >= 0 ? t.rank : t.pid);
    }
    if (!t.name.empty()) ev.Meta("thread_name", t.pid, t.tid, "name", t.name);
    ev.MetaInt("thread_sort_index", t.pid, t.tid, "sort_index", t.sort_index);
  }

  std::vector<std::string_view> op_names(256, "?");
  for (size_t k = 0; k < 256; ++k) op_names[k] = ToString(static_cast<OpKind>(k));

  // Slices per track, parents (earlier start, then longer) first so X events nest.
  std::vector<uint32_t> order(trace.slices().size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Slice& x = trace.slice(a);
    const Slice& y = trace.slice(b);
    if (x.track != y.track) return x.track < y.track;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.dur_ns != y.dur_ns) return x.dur_ns > y.dur_ns;
    return a < b;
  });
  for (uint32_t i : order) {
    const Slice& s = trace.slice(i);
    const Track& t = trace.track(s.track);
    const bool instant = s.has(slice_flags::kInstant);
    ev.Begin(instant ? 'i' : 'X', t.pid, t.tid);
    out.Raw(",\"ts\":");
    out.Micros(s.start_ns);
    if (instant) {
      out.Raw(",\"s\":\"t\"");
    } else {
      out.Raw(",\"dur\":");
      out.Micros(s.dur_ns);
    }
    out.Raw(",\"name\":");
    out.Str(trace.Str(s.name));
    if (s.category != kEmptyString) {
      out.Raw(",\"cat\":");
      out.Str(trace.Str(s.category));
    }
    WriteSliceArgs(out, trace, s, op_names);
    ev.End();
  }

  // Flows: "s" at the source, "f" bound to the enclosing slice at the destination.
  trace.flows().ForEach([&](const Flow& f) {
    const Track& from = trace.track(f.from_track);
    const Track& to = trace.track(f.to_track);
    for (int end = 0; end < 2; ++end) {
      const Track& t = end == 0 ? from : to;
      ev.Begin(end == 0 ? 's' : 'f', t.pid, t.tid);
      out.Raw(",\"ts\":");
      out.Micros(end == 0 ? f.from_ns : f.to_ns);
      out.Raw(",\"id\":");
      out.Int(static_cast<int64_t>(f.id));
      out.Raw(",\"name\":");
      out.Str(trace.Str(f.name));
      out.Raw(",\"cat\":");
      out.Str(trace.Str(f.category));
      if (end == 1) out.Raw(",\"bp\":\"e\"");
      ev.End();
    }
  });

  trace.counters().ForEach([&](const CounterSample& c) {
    const Track& t = trace.track(c.track);
    ev.Begin('C', t.pid, t.tid);
    out.Raw(",\"ts\":");
    out.Micros(c.ts_ns);
    out.Raw(",\"name\":");
    out.Str(trace.Str(c.name));
    out.Raw(",\"args\":{");
    out.Str(c.series == kEmptyString ? std::string_view("value") : trace.Str(c.series));
    out.Char(':');
    out.Double(c.value);
    out.Char('}');
    ev.End();
  });

  out.Raw("\n]}\n");
  out.Flush();
  if (!out.status().ok()) return out.status();
  return sink.Finish();
}

Status WriteChromeTrace(const Trace& trace, const std::string& path, const WriteOptions& options) {
  auto file = AtomicFileSink::Create(path);
  if (!file.ok()) return file.error();
  std::unique_ptr<ByteSink> sink = std::move(file.value());
  if (EndsWith(path, ".gz")) sink = GzipSink(std::move(sink), options.gzip_level);
  return WriteChromeTrace(trace, *sink);
}

}  // namespace parallax::traces
