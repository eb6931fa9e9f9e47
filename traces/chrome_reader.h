#pragma once
// Chrome Trace Event JSON reader: our own output and PyTorch profiler (Kineto) traces, plain or
// gzip (detected by magic bytes). A pull parser, never a DOM of the file: gzip and small files
// stream through a refilled buffer; a large plain file is memory-mapped and its events scanned
// on several threads (parallel_events.h), with the same result as the sequential scan.
//
// Phases: X, B/E, i/I (zero-length slices), C (counters), M (names, sort indices),
// s/t/f (flows; s->f pairs by (cat, id)), b/e (async slices on a per-process async track).
// Other phases of the Chrome spec (n, P, O, N, D, R, c, v, V, (, )) are counted and skipped; any
// other phase is bad input. ts/dur: µs with up to 3 fractional digits kept exactly as ns.
// pid/tid may be numbers or strings (a string is mapped to a stable negative id).
// Kineto categories map onto tracks and slice flags (see kineto.h).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"
#include "traces/byte_stream.h"
#include "traces/read_stats.h"
#include "traces/trace.h"

namespace parallax::traces {

struct ReadOptions {
  //! Load the complete events of a trace cut off mid-file (with a warning) instead of failing.
  bool lenient = false;
  //! Names the input in messages (defaults to the path).
  std::string origin;
  //! Threads that scan a large input (a mapped file, memory, or gzip inflated whole): 0 one
  //! per idle core (the cores less the 1-minute load average, at least one: on a busy machine
  //! the parallel scan's extra CPU costs more than it saves), 1 none (the caller's thread alone).
  int threads = 0;
  //! gzip input is inflated whole (libdeflate) when its JSON takes at most this many bytes, then
  //! read like plain JSON in memory; larger, or not complete valid gzip (a cut or corrupt file),
  //! it streams through zlib in one buffer on one thread, which names the bad byte.
  //! 0: half the memory the system has available.
  size_t inflate_max_bytes = 0;
  //! Inputs at least this large are scanned in parallel; smaller ones by the caller alone.
  size_t parallel_min_bytes = size_t{8} << 20;
  //! Bytes per chunk of the parallel scan (tests use small values to cut everywhere).
  size_t chunk_bytes = size_t{1} << 20;
  //! Called now and then with the input bytes read and the total (-1 when unknown, as for a
  //! ByteSource); returning false cancels the read (an I/O error "<origin>: cancelled").
  std::function<bool(int64_t done, int64_t total)> progress;
};

//! Reads a trace file: a plain file of at least 1 MiB is memory-mapped (and scanned in parallel
//! when large, see ReadOptions), a gzip file is inflated whole (see inflate_max_bytes), small
//! plain files are streamed. Errors (kind kBadInput) read "<file>: event <i> (JSON byte
//! <offset>): <what>".
Result<Trace> ReadChromeTrace(const std::string& path, const ReadOptions& options = {},
                              ReadStats* stats = nullptr);
//! Reads trace bytes held in memory (plain: in place, in parallel when large; gzip: as a file).
Result<Trace> ReadChromeTraceFromMemory(std::string_view bytes, const ReadOptions& options = {},
                                        ReadStats* stats = nullptr);
//! Reads from any byte source (already decompressed if it was gzip).
Result<Trace> ReadChromeTrace(ByteSource& source, const ReadOptions& options,
                              ReadStats* stats = nullptr);

}  // namespace parallax::traces
