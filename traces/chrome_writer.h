#pragma once
// Chrome Trace Event JSON writer (opens in Perfetto UI and chrome://tracing).
//
// Layout: {"kind":"trace","version":1,"displayTimeUnit":"ns","otherData":{metadata},
//          "traceEvents":[ M metadata..., X slices..., s/f flows..., C counters... ]}
// pid = rank and tid = stream for parallax traces, with process_name / thread_name /
// *_sort_index metadata. Slices are written per track in (start, longest first) order so
// nested X events appear parent first. ts/dur are microseconds with exact ns fractions
// ("12.345"). A slice's identity goes into args as
// {"step","rank","mb","stage","layer","op","phase"}; numeric args as "flops", "bytes",
// "group_size", "collective". Streaming: the document is formatted into a small buffer that is
// flushed to the sink, never built whole.

#include <string>

#include "model/result.h"
#include "traces/byte_stream.h"
#include "traces/trace.h"

namespace parallax::traces {

inline constexpr int kTraceFormatVersion = 1;

struct WriteOptions {
  int gzip_level = 6;  //!< used when the path ends in ".gz"
};

//! Writes `trace` to `path` atomically (temp + fsync + rename), gzip when it ends in ".gz".
Status WriteChromeTrace(const Trace& trace, const std::string& path, const WriteOptions& options = {});
//! Writes `trace` to `sink` and finishes it.
Status WriteChromeTrace(const Trace& trace, ByteSink& sink);

}  // namespace parallax::traces
