#include "profiler/foreign/kineto_events.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <istream>
#include <streambuf>
#include <limits>
#include <optional>

#include "model/json_io.h"
#include "traces/byte_stream.h"
#include "traces/json_scanner.h"
#include "traces/kineto.h"

namespace parallax::profiler {
namespace {

//! A time in microseconds to ns, exactly: "ts"/"dur" arrive as their text when written with a
//! fraction (EventSax), integers as integers. A double would not do: Kineto's absolute
//! microsecond timestamps (1.7e15) keep only quarter-microsecond steps in one, and times a
//! thousand not even whole nanoseconds, so a child op could end after its parent.
//! nullopt when `v` is no time (not a number, or past int64 nanoseconds).
std::optional<int64_t> Us2Ns(const Json& v) {
  constexpr int64_t kMaxUs = std::numeric_limits<int64_t>::max() / 1000;
  int64_t ns = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxUs))
      return std::nullopt;
    const auto us = v.get<int64_t>();
    return us > kMaxUs || us < -kMaxUs ? std::nullopt : std::optional<int64_t>(us * 1000);
  }
  if (v.is_string() && traces::ParseMicrosToNs(v.get<std::string>(), &ns)) return ns;
  if (!v.is_number_float() || !std::isfinite(v.get<double>()) ||
      std::abs(v.get<double>()) > static_cast<double>(kMaxUs)) {
    return std::nullopt;
  }
  return std::llround(v.get<double>() * 1000.0);
}

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

//! Reads the document one event at a time (a trace of a few hundred MB would take gigabytes as
//! one DOM): each element of "traceEvents" (or of the array form's top-level array), and
//! "distributedInfo", is built alone and handed on; everything else is skipped. An event's
//! fractional "ts" and "dur" are kept as their text (Us2Ns).
class EventSax {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit EventSax(KinetoEvents& out) : out_(out) {}

  // nlohmann's SAX interface names these callbacks.
  // NOLINTBEGIN(readability-identifier-naming)
  bool null() { return Value(Json()); }
  bool boolean(bool v) { return Value(Json(v)); }
  bool number_integer(number_integer_t v) { return Value(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return Value(Json(v)); }
  bool number_float(number_float_t v, const string_t& text) {
    const bool time = open_.size() == 1 && in_event_ && (key_ == "ts" || key_ == "dur");
    return Value(time ? Json(text) : Json(v));
  }
  bool string(string_t& v) { return Value(Json(std::move(v))); }
  bool binary(binary_t& v) { return Value(Json(std::move(v))); }
  bool key(string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool start_object(size_t /*elements*/) { return Open(Json::object()); }
  bool start_array(size_t /*elements*/) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool parse_error(size_t position, const std::string& /*token*/,
                   const nlohmann::detail::exception& ex) {
    syntax_error_at_ = position;
    error_ = ex.what();
    return false;
  }
  // NOLINTEND(readability-identifier-naming)

  //! The message of a failed parse of `size` bytes (all there were).
  std::string Message(size_t size) const {
    if (syntax_error_at_ == 0) return error_;
    if (size == 0) return "empty: expected a PyTorch profiler trace";
    return (syntax_error_at_ >= size ? "the JSON ends early, at byte " + std::to_string(syntax_error_at_) +
                                           " (a trace cut off while it was written?)"
                                     : "not JSON at byte " + std::to_string(syntax_error_at_) + " (" + error_ + ")") +
           ": expected a PyTorch profiler trace";
  }
  bool HasEvents() const { return has_events_; }
  //! A PyTorch execution trace (ExecutionTraceObserver: {"schema", "nodes": [...]}).
  bool IsExecutionTrace() const { return execution_trace_; }

 private:
  bool Open(Json container) {
    const bool is_array = container.is_array();
    if (!open_.empty()) {
      open_.push_back(&Add(std::move(container)));
    } else if (depth_ == 0) {
      out_.array_form = is_array;
      has_events_ = is_array;
    } else if (depth_ == 1 && !out_.array_form && key_ == "traceEvents" && is_array) {
      has_events_ = in_events_ = true;
    } else if ((depth_ == 1 && out_.array_form) || (depth_ == 2 && in_events_)) {
      StartBuilding(std::move(container), true);
    } else if (depth_ == 1 && key_ == "nodes" && is_array) {
      execution_trace_ = true;
    } else if (depth_ == 1 && key_ == "distributedInfo" && !is_array) {
      StartBuilding(std::move(container), false);
    }
    ++depth_;
    return true;
  }

  bool Close() {
    --depth_;
    if (!open_.empty()) {
      open_.pop_back();
      if (open_.empty()) return Finish();
    } else if (depth_ == 1) {
      in_events_ = false;
    }
    return true;
  }

  bool Value(Json v) {
    if (!open_.empty()) Add(std::move(v));
    return true;
  }

  Json& Add(Json v) {
    Json& c = *open_.back();
    if (c.is_array()) {
      c.push_back(std::move(v));
      return c.back();
    }
    return c[key_] = std::move(v);
  }

  void StartBuilding(Json container, bool event) {
    built_ = std::move(container);
    in_event_ = event;
    events_seen_ += event ? 1 : 0;
    open_.push_back(&built_);
  }

  //! Hands on what was built; false (error_ set) for an event whose times are no times.
  bool Finish();

  KinetoEvents& out_;
  Json built_;
  std::vector<Json*> open_;  //!< the containers of built_ being filled, outermost first
  std::string key_, error_;
  size_t depth_ = 0;
  size_t syntax_error_at_ = 0;  //!< nlohmann's byte position (from 1) of a syntax error
  int64_t events_seen_ = 0;
  bool in_events_ = false, in_event_ = false, has_events_ = false, execution_trace_ = false;
};

bool EventSax::Finish() {
  const Json& ev = built_;
  if (!in_event_) {
    out_.rank = IntArg(ev, "rank");
    out_.world_size = IntArg(ev, "world_size");
    return true;
  }
  if (!ev.is_object() || ev.value("ph", "") != "X" || !ev.contains("name") ||
      !ev["name"].is_string())
    return true;
  KinetoEvent e;
  e.name = ev["name"].get<std::string>();
  e.cat = std::string(traces::KinetoCategory(ev.value("cat", "")));
  const std::optional<int64_t> ts = Us2Ns(ev.value("ts", Json()));
  // A missing duration is an instant; a negative one (a GPU event the profiler never saw end) none.
  const std::optional<int64_t> dur =
      ev.contains("dur") ? Us2Ns(ev["dur"]) : std::optional<int64_t>(0);
  if (!ts || !dur) {
    const char* what = !ts ? "ts" : "dur";
    error_ = "event " + std::to_string(events_seen_ - 1) + " (\"" + e.name.substr(0, 80) +
             "\"): " + what + " " + ev.value(what, Json()).dump() +
             " is not a time in microseconds";
    return false;
  }
  e.ts_ns = *ts;
  e.dur_ns = std::max<int64_t>(0, *dur);
  e.pid = IdOf(ev.value("pid", Json()));
  e.tid = IdOf(ev.value("tid", Json()));
  if (auto it = ev.find("args"); it != ev.end() && it->is_object()) ReadArgs(*it, e);
  out_.events.push_back(std::move(e));
  return true;
}

//! Whether any event has a category the PyTorch profiler writes (the object form; the array form
//! has none): a Chrome trace of another profiler (JAX's, a browser's) has none of them.
bool HasKinetoCategory(const KinetoEvents& ev) {
  return std::any_of(ev.events.begin(), ev.events.end(), [](const KinetoEvent& e) {
    return e.cat == "gpu_user_annotation" || traces::IsHostCategory(e.cat) ||
           traces::SliceFlagsFor(e.cat, "") != 0;
  });
}

//! Up to five of the categories the events have, for a message.
std::string CategoriesSeen(const KinetoEvents& ev) {
  std::vector<std::string> seen;
  for (const auto& e : ev.events) {
    if (seen.size() < 5 && std::find(seen.begin(), seen.end(), e.cat) == seen.end())
      seen.push_back(e.cat);
  }
  std::string out;
  for (const auto& c : seen)
    out += (out.empty() ? "" : ", ") + (c.empty() ? std::string("no category") : "\"" + c + "\"");
  return out;
}

//! A ByteSource as a std::streambuf: the parser reads the (inflated) trace as it comes, never
//! all of it at once.
class SourceBuf : public std::streambuf {
 public:
  explicit SourceBuf(traces::ByteSource& src) : src_(src) {}
  //! A read error (a truncated gzip), which the parser saw as the end.
  const std::optional<Error>& ReadError() const { return error_; }
  size_t Total() const { return total_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    auto n = src_.Read(buf_.data(), buf_.size());
    if (!n) error_ = n.error();
    if (!n || *n == 0) return traits_type::eof();
    total_ += *n;
    setg(buf_.data(), buf_.data(), buf_.data() + *n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  traces::ByteSource& src_;
  std::array<char, 1 << 16> buf_{};
  size_t total_ = 0;
  std::optional<Error> error_;
};

//! What the parse of `origin` gave: its events sorted, or bad input saying what it is instead.
Result<KinetoEvents> Finished(KinetoEvents out, const EventSax& sax, const std::string& origin) {
  if (!sax.HasEvents() && sax.IsExecutionTrace()) {
    return BadInput(
        origin +
        ": a PyTorch execution trace (\"nodes\": its ops without times), not a profiler trace: "
        "give the Kineto trace that torch.profiler wrote beside it");
  }
  if (!sax.HasEvents()) {
    return BadInput(origin + ": neither a Kineto trace ({\"traceEvents\": [...]}) nor the array form of "
                             "PyTorch's autograd profiler ([...])");
  }
  if (out.events.empty()) return BadInput(origin + ": no complete (\"X\") events: not a profiled run");
  if (!out.array_form && !HasKinetoCategory(out)) {
    return BadInput(
        origin + ": no event of the PyTorch profiler's categories (cpu_op, kernel, cuda_runtime, " +
        "user_annotation, ...; it has " + CategoriesSeen(out) + "): a trace of another profiler?");
  }
  std::stable_sort(out.events.begin(), out.events.end(), [](const KinetoEvent& a, const KinetoEvent& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.dur_ns > b.dur_ns;
  });
  return out;
}

}  // namespace

Result<KinetoEvents> ParseKinetoEvents(const std::string& text, const std::string& origin) {
  KinetoEvents out;
  EventSax sax(out);
  if (!Json::sax_parse(text, &sax)) return BadInput(origin + ": " + sax.Message(text.size()));
  return Finished(std::move(out), sax, origin);
}

Result<KinetoEvents> ReadKinetoEvents(const std::string& path) {
  PX_ASSIGN(auto src, traces::OpenTraceSource(path));
  SourceBuf buf(*src);
  std::istream in(&buf);
  KinetoEvents out;
  EventSax sax(out);
  const bool parsed = Json::sax_parse(in, &sax);
  if (buf.ReadError()) return *buf.ReadError();
  if (!parsed) return BadInput(path + ": " + sax.Message(buf.Total()));
  return Finished(std::move(out), sax, path);
}

}  // namespace parallax::profiler
