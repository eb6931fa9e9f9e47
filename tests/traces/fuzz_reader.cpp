// libFuzzer entry point for the Chrome/Kineto trace reader. Built as a libFuzzer binary when the
// compiler is clang (target fuzz_trace_reader) and driven by fuzz_smoke_test.cpp under any
// compiler. Properties checked beyond "no crash, no sanitizer report":
//  - a failed read is bad input with a message;
//  - what is written from a loaded trace is strict JSON (nlohmann accepts it: valid UTF-8 etc.);
//  - whatever loads (strictly or leniently) writes back to Chrome JSON that reloads strictly with
//    the same number of slices, flows and counter samples.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "model/json_io.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"

namespace {

[[noreturn]] void Violation(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_reader property violated: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax::traces;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (const bool lenient : {false, true}) {
    ReadOptions options;
    options.lenient = lenient;
    options.origin = "fuzz";
    ReadStats stats;
    auto trace = ReadChromeTraceFromMemory(input, options, &stats);
    if (!trace.ok()) {
      if (trace.error().kind != parallax::ErrorKind::kBadInput || trace.error().message.empty()) {
        Violation("error is not bad input", trace.error().message);
      }
      continue;
    }
    std::string written;
    auto sink = StringSink(&written);
    if (parallax::Status st = WriteChromeTrace(*trace, *sink); !st.ok()) Violation("write failed", st.error().message);
    if (!parallax::Json::accept(written)) Violation("own output is not strict JSON", written.substr(0, 200));
    auto again = ReadChromeTraceFromMemory(written, ReadOptions{}, nullptr);
    if (!again.ok()) Violation("own output does not reload", again.error().message);
    if (again->slices().size() != trace->slices().size() || again->flows().size() != trace->flows().size() ||
        again->counters().size() != trace->counters().size()) {
      Violation("round trip changed counts", std::to_string(trace->slices().size()) + " slices -> " +
                                                 std::to_string(again->slices().size()));
    }
  }
  return 0;
}
