#include "traces/chrome_reader.h"

#include <cstring>
#include <vector>

#include "traces/event_builder.h"
#include "traces/json_scanner.h"

namespace parallax::traces {
namespace {

//! The input ended inside a unit (event, key, value).
struct Truncated {};
//! The byte source failed (I/O error, corrupt gzip).
struct SourceFailed {
  Error error;
};

class ChromeReader {
 public:
  ChromeReader(ByteSource& src, const ReadOptions& options, ReadStats& stats)
      : src_(src), options_(options), stats_(stats), builder_(trace_, stats_) {
    buf_.resize(kInitialBuffer);
    scanner_.SetWindow(buf_.data(), buf_.data());
  }

  Result<Trace> Run();

 private:
  static constexpr size_t kInitialBuffer = 1 << 16;  // small inputs stay cheap
  static constexpr size_t kSteadyBuffer = 1 << 20;   // large inputs read 1 MiB at a time
  static constexpr size_t kMaxBuffer = size_t{1} << 30;

  //! Runs `fn` (which scans one unit) until it completes, refilling the buffer when it runs off
  //! the end. Throws Truncated when the input ends inside the unit.
  template <class F>
  void Unit(F&& fn) {
    for (;;) {
      const char* save = scanner_.pos();
      scanner_.ResetScratch();
      try {
        fn();
        return;
      } catch (const ScanNeedMore&) {
        scanner_.set_pos(save);
        if (eof_) throw Truncated{};
        Refill();
      }
    }
  }
  void Refill();
  int64_t Offset(const char* p) const { return base_ + (p - buf_.data()); }
  void ParseEvents(bool array_format);
  void ParseEvent();
  void ParseArgs();
  Error Fail(const std::string& what, int64_t offset) const;

  ByteSource& src_;
  const ReadOptions& options_;
  ReadStats& stats_;
  Trace trace_;
  EventBuilder builder_;
  JsonScanner scanner_;
  std::vector<char> buf_;
  size_t filled_ = 0;   // valid bytes in buf_
  int64_t base_ = 0;    // JSON offset of buf_[0]
  bool eof_ = false;
  RawEvent ev_;
  int64_t event_index_ = -1;  // index of the event being parsed, -1 outside traceEvents
  int64_t event_offset_ = 0;
  bool in_events_ = false;
  bool between_events_ = false;  // array format: a cut here is a legal missing ']'
};

void ChromeReader::Refill() {
  const size_t keep_from = static_cast<size_t>(scanner_.pos() - buf_.data());
  const size_t keep = filled_ - keep_from;
  if (keep_from > 0) {
    std::memmove(buf_.data(), buf_.data() + keep_from, keep);
    base_ += static_cast<int64_t>(keep_from);
    if (buf_.size() < kSteadyBuffer) buf_.resize(buf_.size() * 2);
  } else if (keep == buf_.size()) {
    // One unit larger than the buffer: grow it (bounded).
    if (buf_.size() >= kMaxBuffer) {
      throw SourceFailed{BadInput(options_.origin + ": JSON byte " + std::to_string(base_) +
                                  ": a single event is larger than 1 GiB")};
    }
    buf_.resize(buf_.size() * 2);
  }
  filled_ = keep;
  while (filled_ < buf_.size()) {
    auto got = src_.Read(buf_.data() + filled_, buf_.size() - filled_);
    if (!got.ok()) {
      if (options_.lenient && got.error().kind == ErrorKind::kBadInput) {
        stats_.warnings.push_back(got.error().message);
        eof_ = true;
        break;
      }
      throw SourceFailed{got.error()};
    }
    if (*got == 0) {
      eof_ = true;
      break;
    }
    filled_ += *got;
    if (filled_ - keep >= (1 << 16)) break;  // enough progress; parse before reading more
  }
  stats_.json_bytes = base_ + static_cast<int64_t>(filled_);
  scanner_.SetWindow(buf_.data(), buf_.data() + filled_);
  scanner_.SetFinal(eof_);
}

Error ChromeReader::Fail(const std::string& what, int64_t offset) const {
  std::string msg = options_.origin + ": ";
  if (event_index_ >= 0) msg += "event " + std::to_string(event_index_) + " ";
  msg += "(JSON byte " + std::to_string(offset) + "): " + what;
  return BadInput(std::move(msg));
}

void ChromeReader::ParseArgs() {
  ev_.has_args = true;
  scanner_.Expect('{');
  if (scanner_.Consume('}')) return;
  do {
    RawArg a;
    a.key = scanner_.String();
    scanner_.Expect(':');
    a.value = scanner_.Value(2);
    ev_.args.push_back(a);
  } while (scanner_.Consume(','));
  scanner_.Expect('}');
}

void ChromeReader::ParseEvent() {
  ev_.Clear();
  scanner_.Expect('{');
  if (scanner_.Consume('}')) return;
  do {
    const std::string_view key = scanner_.String();
    scanner_.Expect(':');
    RawValue* slot = nullptr;
    switch (key.size()) {
      case 1:
        if (key[0] == 's') slot = &ev_.scope;
        break;
      case 2:
        if (key == "ph") slot = &ev_.ph;
        else if (key == "ts") slot = &ev_.ts;
        else if (key == "id") slot = &ev_.id;
        else if (key == "bp") slot = &ev_.bp;
        break;
      case 3:
        if (key == "pid") slot = &ev_.pid;
        else if (key == "tid") slot = &ev_.tid;
        else if (key == "cat") slot = &ev_.cat;
        else if (key == "dur") slot = &ev_.dur;
        break;
      case 4:
        if (key == "name") slot = &ev_.name;
        else if (key == "args") {
          if (scanner_.Peek() == '{') {
            ev_.args.clear();
            ParseArgs();
            continue;
          }
        }
        break;
      default:
        break;
    }
    if (slot != nullptr) {
      *slot = scanner_.Value(1);
    } else {
      scanner_.Skip(1);
    }
  } while (scanner_.Consume(','));
  scanner_.Expect('}');
}

void ChromeReader::ParseEvents(bool array_format) {
  in_events_ = true;
  bool done = false;
  Unit([&] { done = scanner_.Consume(']'); });
  int64_t index = 0;
  while (!done) {
    event_index_ = index;
    between_events_ = false;
    Unit([&] {
      scanner_.SkipWs();
      event_offset_ = Offset(scanner_.pos());
      ParseEvent();
    });
    try {
      builder_.Add(ev_);
    } catch (const EventError& e) {
      throw SourceFailed{Fail(e.what, event_offset_)};
    }
    ++index;
    between_events_ = array_format;
    Unit([&] {
      if (scanner_.Consume(',')) {
        // Trailing comma before ']' is common in streamed array-format traces.
        if (array_format && scanner_.Peek() == ']') {
          scanner_.Expect(']');
          done = true;
        }
        return;
      }
      scanner_.Expect(']');
      done = true;
    });
  }
  event_index_ = -1;
  in_events_ = false;
  between_events_ = false;
}

Result<Trace> ChromeReader::Run() {
  try {
    try {
      Refill();
      char first = 0;
      Unit([&] { first = scanner_.Peek(); });
      if (first == '[') {
        Unit([&] { scanner_.Expect('['); });
        ParseEvents(/*array_format=*/true);
      } else if (first == '{') {
        Unit([&] { scanner_.Expect('{'); });
        bool more = true;
        Unit([&] { more = !scanner_.Consume('}'); });
        bool saw_events = false;
        while (more) {
          std::string key;
          Unit([&] {
            key = std::string(scanner_.String());
            scanner_.Expect(':');
            scanner_.SkipWs();
          });
          if (key == "traceEvents") {
            Unit([&] { scanner_.Expect('['); });
            ParseEvents(/*array_format=*/false);
            saw_events = true;
          } else {
            Json value;
            int64_t at = 0;
            Unit([&] {
              at = Offset(scanner_.pos());
              value = scanner_.ToJson(1);
            });
            try {
              builder_.TopLevel(key, value);
            } catch (const EventError& e) {
              throw SourceFailed{Fail(e.what, at)};
            }
          }
          Unit([&] {
            if (!scanner_.Consume(',')) {
              scanner_.Expect('}');
              more = false;
            }
          });
        }
        if (!saw_events) throw SourceFailed{Fail("no traceEvents array", 0)};
      } else {
        throw ScanError{scanner_.pos(), std::string("expected '{' or '[' but found '") + first + "'"};
      }
      // Only whitespace may follow.
      for (;;) {
        scanner_.SkipWs();
        if (scanner_.pos() != buf_.data() + filled_) {
          throw ScanError{scanner_.pos(), "unexpected data after the trace"};
        }
        if (eof_) break;
        Refill();
      }
    } catch (const Truncated&) {
      const int64_t at = base_ + static_cast<int64_t>(filled_);
      if (between_events_) {
        // Array format without the closing ']': allowed by the Trace Event Format.
      } else if (options_.lenient && stats_.events > 0) {
        stats_.truncated = true;
        stats_.warnings.push_back(options_.origin + ": input ends at JSON byte " + std::to_string(at) +
                                  " inside " + (in_events_ ? "an event" : "the trace object") +
                                  "; loaded the " + std::to_string(stats_.events) + " complete events");
      } else {
        const std::string where = in_events_ ? "inside event " + std::to_string(event_index_)
                                             : std::string("outside traceEvents");
        event_index_ = -1;
        return Fail("truncated JSON: input ends " + where +
                        (options_.lenient ? " before any complete event" : " (use --lenient to load the complete events)"),
                    at);
      }
    }
  } catch (const ScanError& e) {
    return Fail("invalid JSON: " + e.what, Offset(e.at));
  } catch (const SourceFailed& e) {
    return e.error;
  }
  builder_.Finish();
  stats_.raw_bytes = src_.raw_offset();
  if (trace_.metadata.source.empty()) trace_.metadata.source = options_.origin;
  return std::move(trace_);
}

}  // namespace

Result<Trace> ReadChromeTrace(ByteSource& source, const ReadOptions& options, ReadStats* stats) {
  ReadStats local;
  ReadStats& s = stats != nullptr ? *stats : local;
  s = ReadStats{};
  ChromeReader reader(source, options, s);
  return reader.Run();
}

Result<Trace> ReadChromeTrace(const std::string& path, const ReadOptions& options, ReadStats* stats) {
  auto src = OpenTraceSource(path);
  if (!src.ok()) return src.error();
  ReadOptions o = options;
  if (o.origin.empty()) o.origin = path;
  return ReadChromeTrace(**src, o, stats);
}

Result<Trace> ReadChromeTraceFromMemory(std::string_view bytes, const ReadOptions& options,
                                        ReadStats* stats) {
  ReadOptions o = options;
  if (o.origin.empty()) o.origin = "<memory>";
  auto src = OpenMemoryTraceSource(bytes, o.origin);
  return ReadChromeTrace(*src, o, stats);
}

}  // namespace parallax::traces
