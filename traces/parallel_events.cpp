#include "traces/parallel_events.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "traces/event_scan.h"
#include "traces/json_scanner.h"

namespace parallax::traces {
namespace {

bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

//! The last non-space character before `p`, or nullptr.
const char* PrevNonWs(const char* begin, const char* p) {
  while (p > begin) {
    --p;
    if (!IsWs(*p)) return p;
  }
  return nullptr;
}

//! bounds[0] = begin; then, about every `chunk` bytes, the first '{' preceded by "}," (spaces
//! allowed): where an event starts in any trace writer's layout. Strictly increasing.
std::vector<const char*> GuessBoundaries(const char* begin, const char* end, size_t chunk) {
  std::vector<const char*> bounds{begin};
  const char* from = begin + std::min(chunk, static_cast<size_t>(end - begin));
  while (from < end) {
    const char* found = nullptr;
    for (const char* p = from; p < end;) {
      const auto* brace = static_cast<const char*>(std::memchr(p, '{', static_cast<size_t>(end - p)));
      if (brace == nullptr) break;
      const char* comma = PrevNonWs(begin, brace);
      if (comma != nullptr && *comma == ',') {
        const char* close = PrevNonWs(begin, comma);
        if (close != nullptr && *close == '}') {
          found = brace;
          break;
        }
      }
      p = brace + 1;
    }
    if (found == nullptr) break;
    bounds.push_back(found);
    if (static_cast<size_t>(end - found) <= chunk) break;
    from = found + chunk;
  }
  return bounds;
}

struct Chunk {
  //! The chunk's events are events[0, count): the entries past it stay allocated for the next
  //! chunk this buffer is reused for (RawEvent is large; constructing one per event cost a pass).
  std::vector<RawEvent> events;
  size_t count = 0;
  std::vector<const char*> starts;  // where each event starts (its '{')
  std::vector<RawArg> args;
  JsonScanner scanner;  // owns the decoded strings the events view
  size_t landed = 0;    // > 0: stopped at the start of chunk `landed`
  EventsEnd end;
  std::exception_ptr failure;

  void Reset() {
    count = 0;
    starts.clear();
    args.clear();
    scanner.ResetScratch();
    landed = 0;
    end = EventsEnd{};
    failure = nullptr;
  }
};

//! Scans chunk `k` from bounds[k] until it lands on a later guess, the array ends, or the text
//! is invalid or ends. Checks `quit` every 256 events.
void ScanChunk(Chunk& c, size_t k, const std::vector<const char*>& bounds, const char* end,
               bool array_format, const std::atomic<bool>& quit) {
  JsonScanner& s = c.scanner;
  s.SetWindow(bounds[k], end);
  s.SetFinal(true);
  size_t next = k + 1;
  bool in_event = false;
  size_t n = 0;
  try {
    for (;;) {
      s.SkipWs();
      const char* at = s.pos();
      while (next < bounds.size() && bounds[next] < at) ++next;
      if (next < bounds.size() && bounds[next] == at) {
        c.landed = next;
        return;
      }
      if ((++n & 255) == 0 && quit.load(std::memory_order_relaxed)) {
        c.end.kind = EventsEnd::Kind::kCancelled;
        return;
      }
      in_event = true;
      if (c.count == c.events.size()) c.events.emplace_back();
      RawEvent& ev = c.events[c.count++];  // ScanEvent clears it
      ScanEvent(s, ev, c.args);
      ev.BindArgs(c.args);  // valid until the store grows; the consumer binds again
      EventBuilder::Predecode(ev);
      if (!EventBuilder::NeedsArgs(ev)) {
        // Decoded: its args need not wait for the consumer. The store keeps reusing the same
        // few cache lines instead of growing by ~0.5 KB per event.
        c.args.resize(ev.args_begin);
        ev.args_count = 0;
        ev.args = {};
      }
      c.starts.push_back(at);
      in_event = false;
      if (s.Consume(',')) {
        // Trailing comma before ']' is common in streamed array-format traces.
        if (array_format && s.Peek() == ']') {
          s.Expect(']');
          c.end = EventsEnd{EventsEnd::Kind::kEnd, s.pos(), {}, false};
          return;
        }
        continue;
      }
      s.Expect(']');
      c.end = EventsEnd{EventsEnd::Kind::kEnd, s.pos(), {}, false};
      return;
    }
  } catch (const ScanNeedMore&) {
    if (in_event) --c.count;
    c.end = EventsEnd{EventsEnd::Kind::kTruncated, end, {}, !in_event};
  } catch (const ScanError& e) {
    if (in_event) --c.count;
    c.end = EventsEnd{EventsEnd::Kind::kScanError, e.at, e.what, !in_event};
  }
}

enum class SlotState : uint8_t { kWaiting, kRunning, kDone };

struct Slot {
  SlotState state = SlotState::kWaiting;
  bool skipped = false;             // the consumer passed over it (a wrong guess)
  std::atomic<bool> quit{false};    // tells its worker to stop early
  std::unique_ptr<Chunk> chunk;
};

}  // namespace

EventsEnd ScanEventsParallel(const char* begin, const char* end, bool array_format,
                             const ParallelEventsOptions& options,
                             const std::function<void(const RawEvent&, const char*)>& consume) {
  const std::vector<const char*> bounds =
      GuessBoundaries(begin, end, std::max<size_t>(options.chunk_bytes, 1));
  const size_t n = bounds.size();
  const int threads = std::max(1, options.threads);
  const size_t window = 2 * static_cast<size_t>(threads) + 2;  // chunks scanned ahead at most

  std::vector<Slot> slots(n);
  std::mutex mu;
  std::condition_variable done_cv, window_cv;
  size_t next_index = 0;   // next chunk a worker takes
  size_t base = 0;         // the chunk the consumer is at
  bool stop = false;
  std::vector<std::unique_ptr<Chunk>> pool;  // recycled chunk buffers (they stay in cache)

  auto worker = [&] {
    for (;;) {
      size_t k;
      std::unique_ptr<Chunk> c;
      {
        std::unique_lock lock(mu);
        if (stop || next_index >= n) return;
        k = next_index++;
        window_cv.wait(lock, [&] { return stop || slots[k].skipped || k < base + window; });
        if (stop) return;
        if (slots[k].skipped) continue;
        slots[k].state = SlotState::kRunning;
        if (pool.empty()) {
          c = std::make_unique<Chunk>();
        } else {
          c = std::move(pool.back());
          pool.pop_back();
        }
      }
      c->Reset();
      try {
        ScanChunk(*c, k, bounds, end, array_format, slots[k].quit);
      } catch (...) {
        c->failure = std::current_exception();  // std::bad_alloc: rethrown by the consumer
      }
      {
        std::lock_guard lock(mu);
        if (slots[k].skipped) {
          pool.push_back(std::move(c));
        } else {
          slots[k].chunk = std::move(c);
        }
        slots[k].state = SlotState::kDone;
      }
      done_cv.notify_all();
    }
  };

  std::vector<std::thread> workers;
  struct Joiner {
    std::vector<std::thread>& workers;
    std::mutex& mu;
    bool& stop;
    std::vector<Slot>& slots;
    std::condition_variable& window_cv;
    ~Joiner() {
      {
        std::lock_guard lock(mu);
        stop = true;
        for (Slot& s : slots) s.quit.store(true, std::memory_order_relaxed);
      }
      window_cv.notify_all();
      for (std::thread& t : workers) t.join();
    }
  } joiner{workers, mu, stop, slots, window_cv};
  for (int i = 0; i < threads; ++i) {
    try {
      workers.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // out of threads: go on with those started
    }
  }
  if (workers.empty()) return EventsEnd{EventsEnd::Kind::kNoThreads, begin, {}, false};

  size_t k = 0;
  for (;;) {
    std::unique_ptr<Chunk> c;
    {
      std::unique_lock lock(mu);
      done_cv.wait(lock, [&] { return slots[k].state == SlotState::kDone; });
      c = std::move(slots[k].chunk);
    }
    if (c->failure) std::rethrow_exception(c->failure);
    for (size_t i = 0; i < c->count; ++i) {
      RawEvent& ev = c->events[i];
      ev.BindArgs(c->args);
      consume(ev, c->starts[i]);
    }
    if (c->landed == 0) return c->end;  // the chunk owns nothing the result refers to
    const size_t j = c->landed;
    if (options.progress && !options.progress(bounds[j] - begin)) {
      return EventsEnd{EventsEnd::Kind::kCancelled, bounds[j], {}, true};
    }
    {
      std::lock_guard lock(mu);
      for (size_t i = k + 1; i < j; ++i) {  // wrong guesses: their text was scanned as part of k
        slots[i].skipped = true;
        slots[i].quit.store(true, std::memory_order_relaxed);
        if (slots[i].state == SlotState::kDone && slots[i].chunk) pool.push_back(std::move(slots[i].chunk));
      }
      pool.push_back(std::move(c));
      base = j;
    }
    window_cv.notify_all();
    k = j;
  }
}

}  // namespace parallax::traces
