// Fuzz entry: nccl-tests output (parallax calibrate --import-nccl-tests). Properties: a rejection
// is bad input naming the file (and line); an accepted output imports into curves whose every
// point has a positive size and time, or is rejected by the import as bad input.
#include <cmath>
#include <string>

#include "profiler/nccl_tests/import.h"
#include "profiler/nccl_tests/output_parser.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kReader = "nccl_tests";
// The file name names the program, as real outputs of older nccl-tests versions need.
constexpr const char* kOrigin = "fuzz_all_reduce_perf.txt";

// This reader names the file and the line ("<file>:<line>: what") or the file alone ("<file>: ").
void CheckRejection(const parallax::Error& e) {
  if (e.kind != parallax::ErrorKind::kBadInput) {
    parallax::fuzz::Violation(kReader, "rejection is not bad input", e.message);
  }
  if (e.message.rfind(std::string(kOrigin) + ":", 0) != 0) {
    parallax::fuzz::Violation(kReader, "the message does not start with the file name", e.message);
  }
}
}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax;
  using namespace parallax::fuzz;
  auto out = profiler::ParseNcclTestsOutput(Text(data, size), kOrigin);
  if (!out) {
    CheckRejection(out.error());
    return 0;
  }
  auto imported = profiler::ImportNcclTests(*out);
  if (!imported) {
    CheckRejection(imported.error());
    return 0;
  }
  NoteAccepted();
  for (const CollectiveCurve& c : imported->curves) {
    for (const auto& p : c.points) {
      if (!(p.bytes > 0) || !(p.time_s > 0) || !std::isfinite(p.time_s)) {
        Violation(kReader, "imported a point without a positive size and time", out->file);
      }
    }
  }
  return 0;
}
