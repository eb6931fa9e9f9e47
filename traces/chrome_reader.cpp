#include "traces/chrome_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "traces/event_builder.h"
#include "traces/event_scan.h"
#include "traces/inflate_whole.h"
#include "traces/json_scanner.h"
#include "traces/parallel_events.h"

namespace parallax::traces {
namespace {

//! What a JSON value starting with `c` is, for messages ("an object", "a string", ...).
std::string JsonKindAt(char c) {
  switch (c) {
    case '{': return "an object";
    case '"': return "a string";
    case 't': case 'f': return "a boolean";
    case 'n': return "null";
    default: return c == '-' || (c >= '0' && c <= '9') ? "a number" : std::string("'") + c + "'";
  }
}

//! Cores not busy with other work: the cores less the 1-minute load average, at least one. The
//! parallel scan costs about a fifth more CPU than the sequential one (events move between
//! cores, threads wait on each other), which only pays when cores are idle to run it.
int IdleCores() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double load = 0;
  if (::getloadavg(&load, 1) != 1) return cores;
  return std::clamp(cores - static_cast<int>(std::lround(load)), 1, cores);
}

//! The input ended inside a unit (event, key, value).
struct Truncated {};
//! The byte source failed (I/O error, corrupt gzip).
struct SourceFailed {
  Error error;
};

class ChromeReader {
 public:
  //! Streams from `src`.
  ChromeReader(ByteSource& src, const ReadOptions& options, ReadStats& stats)
      : src_(&src), options_(options), stats_(stats), builder_(trace_, stats_) {
    buf_.resize(kInitialBuffer);
    data_ = buf_.data();
    scanner_.SetWindow(data_, data_);
  }
  //! Reads JSON held in memory (one window over all of it; no copy).
  ChromeReader(std::string_view json, const ReadOptions& options, ReadStats& stats)
      : options_(options), stats_(stats), builder_(trace_, stats_) {
    data_ = json.data();
    filled_ = json.size();
    eof_ = true;
    stats_.json_bytes = static_cast<int64_t>(json.size());
    scanner_.SetWindow(data_, data_ + filled_);
    scanner_.SetFinal(true);
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
  int64_t Offset(const char* p) const { return base_ + (p - data_); }
  void ParseEvents(bool array_format);
  //! False when no thread could be started (nothing consumed: scan sequentially instead).
  bool ParseEventsParallel(bool array_format, int threads);
  //! Hands one scanned event to the builder (errors name the event and its offset).
  void AddEvent(const RawEvent& ev, int64_t index, int64_t offset);
  bool Progress(int64_t done, int64_t total) const { return !options_.progress || options_.progress(done, total); }
  Error Cancelled() const { return Error{options_.origin + ": cancelled", ErrorKind::kIo}; }
  Error Fail(const std::string& what, int64_t offset) const;

  ByteSource* src_ = nullptr;  // null: the JSON is in memory
  const ReadOptions& options_;
  ReadStats& stats_;
  Trace trace_;
  EventBuilder builder_;
  JsonScanner scanner_;
  std::vector<char> buf_;        // streaming only
  const char* data_ = nullptr;   // the window: buf_ when streaming, else the whole JSON
  size_t filled_ = 0;   // valid bytes at data_
  int64_t base_ = 0;    // JSON offset of data_[0]
  bool eof_ = false;
  RawEvent ev_;
  std::vector<RawArg> args_;  // ev_'s args
  int64_t event_index_ = -1;  // index of the event being parsed, -1 outside traceEvents
  int64_t event_offset_ = 0;
  bool in_events_ = false;
  bool between_events_ = false;  // array format: a cut here is a legal missing ']'
};

void ChromeReader::Refill() {
  if (!Progress(src_->raw_offset(), -1)) throw SourceFailed{Cancelled()};
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
    auto got = src_->Read(buf_.data() + filled_, buf_.size() - filled_);
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
  data_ = buf_.data();
  scanner_.SetWindow(data_, data_ + filled_);
  scanner_.SetFinal(eof_);
}

Error ChromeReader::Fail(const std::string& what, int64_t offset) const {
  std::string msg = options_.origin + ": ";
  if (event_index_ >= 0) msg += "event " + std::to_string(event_index_) + " ";
  msg += "(JSON byte " + std::to_string(offset) + "): " + what;
  return BadInput(std::move(msg));
}

void ChromeReader::AddEvent(const RawEvent& ev, int64_t index, int64_t offset) {
  event_index_ = index;
  event_offset_ = offset;
  try {
    builder_.Add(ev);
  } catch (const EventError& e) {
    throw SourceFailed{Fail(e.what, event_offset_)};
  }
}

bool ChromeReader::ParseEventsParallel(bool array_format, int threads) {
  ParallelEventsOptions po;
  po.threads = threads;
  po.chunk_bytes = options_.chunk_bytes;
  const int64_t total = static_cast<int64_t>(filled_);
  const int64_t start = Offset(scanner_.pos());
  if (options_.progress) po.progress = [&](int64_t done) { return Progress(start + done, total); };
  int64_t index = 0;
  const EventsEnd end =
      ScanEventsParallel(scanner_.pos(), data_ + filled_, array_format, po, [&](const RawEvent& ev, const char* at) {
        AddEvent(ev, index, Offset(at));
        ++index;
      });
  if (end.kind == EventsEnd::Kind::kNoThreads) return false;
  // As the sequential loop leaves them: between events the index is the last event's.
  event_index_ = end.after_event ? index - 1 : index;
  between_events_ = end.after_event && array_format;
  switch (end.kind) {
    case EventsEnd::Kind::kEnd:
      scanner_.set_pos(end.at);
      break;
    case EventsEnd::Kind::kScanError:
      throw ScanError{end.at, end.what};
    case EventsEnd::Kind::kTruncated:
      throw Truncated{};
    case EventsEnd::Kind::kCancelled:
      throw SourceFailed{Cancelled()};
    case EventsEnd::Kind::kNoThreads:
      break;
  }
  return true;
}

void ChromeReader::ParseEvents(bool array_format) {
  in_events_ = true;
  bool done = false;
  Unit([&] { done = scanner_.Consume(']'); });
  const int threads = options_.threads > 0 ? options_.threads : IdleCores();
  if (!done && src_ == nullptr && threads > 1 && filled_ >= options_.parallel_min_bytes) {
    done = ParseEventsParallel(array_format, threads);
  }
  int64_t index = 0;
  while (!done) {
    event_index_ = index;
    between_events_ = false;
    Unit([&] {
      scanner_.SkipWs();
      event_offset_ = Offset(scanner_.pos());
      args_.clear();
      ScanEvent(scanner_, ev_, args_);
    });
    ev_.BindArgs(args_);
    AddEvent(ev_, index, event_offset_);
    if (src_ == nullptr && (index & 0x3fff) == 0x3fff &&
        !Progress(Offset(scanner_.pos()), static_cast<int64_t>(filled_))) {
      throw SourceFailed{Cancelled()};
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
      if (src_ != nullptr) Refill();
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
            char open = 0;
            Unit([&] { open = scanner_.Peek(); });
            if (open != '[') {
              throw SourceFailed{Fail(std::string("/traceEvents: must be an array of events, found ") +
                                          JsonKindAt(open),
                                      Offset(scanner_.pos()))};
            }
            scanner_.Expect('[');
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
        if (scanner_.pos() != data_ + filled_) {
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
  stats_.raw_bytes = src_ != nullptr ? src_->raw_offset() : static_cast<int64_t>(filled_);
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

namespace {

Result<Trace> ReadPlainJson(std::string_view json, const ReadOptions& options, ReadStats* stats) {
  ReadStats local;
  ReadStats& s = stats != nullptr ? *stats : local;
  s = ReadStats{};
  ChromeReader reader(json, options, s);
  return reader.Run();
}

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

//! A read-only private mapping of a whole file.
class MappedFile {
 public:
  MappedFile(int fd, size_t size) : size_(size) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      data_ = static_cast<const char*>(p);
      ::madvise(p, size, MADV_WILLNEED);  // read ahead when the file is not cached yet
    }
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  bool Ok() const { return data_ != nullptr; }
  std::string_view Bytes() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_;
};

constexpr size_t kMapMinBytes = size_t{1} << 20;

//! gzip bytes: inflated whole and read as plain JSON in memory when they fit, else streamed.
Result<Trace> ReadGzip(std::string_view gz, const ReadOptions& options, ReadStats* stats) {
  if (options.progress && !options.progress(0, -1)) return Error{options.origin + ": cancelled", ErrorKind::kIo};
  const size_t limit = options.inflate_max_bytes > 0 ? options.inflate_max_bytes : DefaultInflateLimit();
  if (std::optional<InflatedBytes> json = InflateWhole(gz, limit)) {
    Result<Trace> trace = ReadPlainJson(json->View(), options, stats);
    if (stats != nullptr) stats->raw_bytes = static_cast<int64_t>(gz.size());
    return trace;
  }
  auto src = OpenMemoryTraceSource(gz, options.origin);
  return ReadChromeTrace(*src, options, stats);
}

}  // namespace

Result<Trace> ReadChromeTrace(const std::string& path, const ReadOptions& options, ReadStats* stats) {
  ReadOptions o = options;
  if (o.origin.empty()) o.origin = path;
  {
    auto fd = OpenRegularFile(path);
    if (!fd.ok()) return fd.error();
    struct stat st {};
    char magic[2] = {0, 0};
    const bool sized = ::fstat(*fd, &st) == 0 && ::pread(*fd, magic, 2, 0) == 2;
    const bool gzip = sized && IsGzip({magic, 2});
    if (sized && (gzip || static_cast<size_t>(st.st_size) >= kMapMinBytes)) {
      MappedFile map(*fd, static_cast<size_t>(st.st_size));
      ::close(*fd);
      if (map.Ok()) return gzip ? ReadGzip(map.Bytes(), o, stats) : ReadPlainJson(map.Bytes(), o, stats);
    } else {
      ::close(*fd);
    }
  }
  auto src = OpenTraceSource(path);
  if (!src.ok()) return src.error();
  return ReadChromeTrace(**src, o, stats);
}

Result<Trace> ReadChromeTraceFromMemory(std::string_view bytes, const ReadOptions& options,
                                        ReadStats* stats) {
  ReadOptions o = options;
  if (o.origin.empty()) o.origin = "<memory>";
  return IsGzip(bytes) ? ReadGzip(bytes, o, stats) : ReadPlainJson(bytes, o, stats);
}

}  // namespace parallax::traces
