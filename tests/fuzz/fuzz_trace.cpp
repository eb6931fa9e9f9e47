// Fuzz entry: the Chrome/Kineto trace reader (plain and gzip). Built as the libFuzzer binary
// fuzz_trace and replayed under any compiler by fuzz_replay_test and trace_mutation_test.
// Properties checked beyond "no crash, no sanitizer report":
//  - a failed read is bad input whose message starts with the file name;
//  - what is written from a loaded trace is strict JSON (nlohmann accepts it: valid UTF-8 etc.);
//  - whatever loads (strictly or leniently) writes back to Chrome JSON that reloads strictly with
//    the same number of slices, flows and counter samples;
//  - the parallel scan (chunks cut every few bytes, two threads) gives the same outcome: the
//    same error message, or the same written trace.
#include <string>
#include <string_view>

#include "model/json_io.h"
#include "tests/fuzz/fuzz_target.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"

namespace {
constexpr const char* kReader = "trace";

[[noreturn]] void Violation(const char* what, const std::string& detail) {
  parallax::fuzz::Violation(kReader, what, detail);
}

}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax::traces;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  bool accepted = false;
  for (const bool lenient : {false, true}) {
    ReadOptions options;
    options.lenient = lenient;
    options.origin = "fuzz";
    ReadStats stats;
    options.threads = 1;
    auto trace = ReadChromeTraceFromMemory(input, options, &stats);
    ReadOptions par = options;
    par.threads = 2;
    par.parallel_min_bytes = 0;
    par.chunk_bytes = 1 + size % 61;
    auto par_trace = ReadChromeTraceFromMemory(input, par, nullptr);
    if (par_trace.ok() != trace.ok() ||
        (!trace.ok() && par_trace.error().message != trace.error().message)) {
      Violation("parallel read differs", (trace.ok() ? std::string("ok") : trace.error().message) + " | " +
                                             (par_trace.ok() ? std::string("ok") : par_trace.error().message));
    }
    if (!trace.ok()) {
      parallax::fuzz::CheckBadInput(kReader, trace.error(), options.origin);
      continue;
    }
    accepted = true;
    std::string written;
    auto sink = StringSink(&written);
    if (parallax::Status st = WriteChromeTrace(*trace, *sink); !st.ok()) Violation("write failed", st.error().message);
    if (!parallax::Json::accept(written)) Violation("own output is not strict JSON", written.substr(0, 200));
    std::string par_written;
    auto par_sink = StringSink(&par_written);
    if (!WriteChromeTrace(*par_trace, *par_sink).ok() || par_written != written) {
      Violation("parallel read differs", "written traces differ");
    }
    auto again = ReadChromeTraceFromMemory(written, ReadOptions{}, nullptr);
    if (!again.ok()) Violation("own output does not reload", again.error().message);
    if (again->slices().size() != trace->slices().size() || again->flows().size() != trace->flows().size() ||
        again->counters().size() != trace->counters().size()) {
      Violation("round trip changed counts", std::to_string(trace->slices().size()) + " slices -> " +
                                                 std::to_string(again->slices().size()));
    }
  }
  if (accepted) parallax::fuzz::NoteAccepted();
  return 0;
}
