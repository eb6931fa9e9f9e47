#pragma once
// ParallelEvents: scans the entries of a traceEvents array held in memory on several threads
// and hands them, in file order, to a callback on the calling thread (internal to the Chrome
// reader).
//
// The text is cut into chunks at guessed event boundaries ('{' after "}," outside any check of
// strings). Each worker scans one chunk from its guessed start and stops when one of its event
// starts is exactly a later guess. A guess is trusted only when the chunk before it, itself
// trusted, lands on it; chunk 0 starts at the true first event. So every event handed on was
// scanned from a true event start, as the sequential reader would have, and a wrong guess (a
// "}, {" inside a nested array, say) only costs that its chunk is scanned again as part of the
// chunk before it. The result, errors included, is the sequential scan's.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "traces/event_builder.h"

namespace parallax::traces {

struct EventsEnd {
  enum class Kind : uint8_t {
    kEnd,        //!< the closing ']' was consumed; `at` is just after it
    kScanError,  //!< invalid JSON at `at`
    kTruncated,  //!< the input ended
    kCancelled,  //!< `progress` returned false
    kNoThreads,  //!< no thread could be started; nothing was consumed (scan sequentially)
  };
  Kind kind = Kind::kEnd;
  const char* at = nullptr;
  std::string what;           //!< kScanError: the scanner's message
  bool after_event = false;   //!< kScanError/kTruncated: between events (after the last one handed on)
};

struct ParallelEventsOptions {
  int threads = 2;                   //!< scanning threads besides the caller
  size_t chunk_bytes = size_t{1} << 20;
  //! Called on the caller's thread with the offset (from `begin`) reached; false cancels.
  std::function<bool(int64_t)> progress;
};

//! Scans array entries from `begin` (after '[', the array known to be non-empty) to `end` (the
//! end of the input). `array_format`: a top-level array, where a trailing comma before ']' is
//! accepted. `consume(event, start)` runs on the calling thread for each event in order; an
//! exception it throws stops the workers and propagates.
EventsEnd ScanEventsParallel(const char* begin, const char* end, bool array_format,
                             const ParallelEventsOptions& options,
                             const std::function<void(const RawEvent&, const char*)>& consume);

}  // namespace parallax::traces
