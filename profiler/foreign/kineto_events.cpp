#include "profiler/foreign/kineto_events.h"

#include <algorithm>
#include <cmath>

#include "model/json_io.h"
#include "traces/byte_stream.h"

namespace parallax::profiler {
namespace {

int64_t Us2Ns(const Json& v) { return v.is_number() ? std::llround(v.get<double>() * 1000.0) : 0; }

int64_t IntArg(const Json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_number() ? it->get<int64_t>() : -1;
}

std::string StringArg(const Json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

//! An id that the array form writes as a number or a string.
int64_t IdOf(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    try {
      return std::stoll(v.get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

void ReadArgs(const Json& args, KinetoEvent& e) {
  e.correlation = IntArg(args, "correlation");
  e.external_id = IntArg(args, "External id");
  e.sequence = IntArg(args, "Sequence number");
  e.module = StringArg(args, "Module Hierarchy");
  if (auto it = args.find("Input Dims"); it != args.end() && it->is_array()) {
    for (const Json& d : *it) {
      std::vector<int64_t> dims;
      if (d.is_array()) {
        for (const Json& x : d) dims.push_back(x.is_number_integer() ? x.get<int64_t>() : -1);
      }
      e.input_dims.push_back(std::move(dims));
    }
  }
  if (auto it = args.find("Input type"); it != args.end() && it->is_array()) {
    for (const Json& t : *it) e.input_types.push_back(t.is_string() ? t.get<std::string>() : "");
  }
  e.collective = StringArg(args, "Collective name");
  e.in_nelems = IntArg(args, "In msg nelems");
  e.dtype = StringArg(args, "dtype");
  e.group_size = std::max<int64_t>(0, IntArg(args, "Group size"));
}

}  // namespace

Result<KinetoEvents> ParseKinetoEvents(const std::string& text, const std::string& origin) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) return BadInput(origin + ": not JSON (expected a PyTorch profiler trace)");
  KinetoEvents out;
  const Json* events = nullptr;
  if (j.is_array()) {
    out.array_form = true;
    events = &j;
  } else if (j.is_object() && j.contains("traceEvents") && j["traceEvents"].is_array()) {
    events = &j["traceEvents"];
    if (auto it = j.find("distributedInfo"); it != j.end() && it->is_object()) {
      out.rank = IntArg(*it, "rank");
      out.world_size = IntArg(*it, "world_size");
    }
  } else {
    return BadInput(origin + ": neither a Kineto trace ({\"traceEvents\": [...]}) nor the array form of "
                             "PyTorch's autograd profiler ([...])");
  }
  for (const Json& ev : *events) {
    if (!ev.is_object() || ev.value("ph", "") != "X" || !ev.contains("name") || !ev["name"].is_string()) continue;
    KinetoEvent e;
    e.name = ev["name"].get<std::string>();
    e.cat = ev.value("cat", "");
    e.ts_ns = Us2Ns(ev.value("ts", Json()));
    e.dur_ns = std::max<int64_t>(0, Us2Ns(ev.value("dur", Json())));
    e.pid = IdOf(ev.value("pid", Json()));
    e.tid = IdOf(ev.value("tid", Json()));
    if (auto it = ev.find("args"); it != ev.end() && it->is_object()) ReadArgs(*it, e);
    out.events.push_back(std::move(e));
  }
  if (out.events.empty()) return BadInput(origin + ": no complete (\"X\") events: not a profiled run");
  std::stable_sort(out.events.begin(), out.events.end(), [](const KinetoEvent& a, const KinetoEvent& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.dur_ns > b.dur_ns;
  });
  return out;
}

Result<KinetoEvents> ReadKinetoEvents(const std::string& path) {
  PX_ASSIGN(auto src, traces::OpenTraceSource(path));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    PX_ASSIGN(size_t n, src->Read(buf, sizeof buf));
    if (n == 0) break;
    text.append(buf, n);
  }
  return ParseKinetoEvents(text, path);
}

}  // namespace parallax::profiler
