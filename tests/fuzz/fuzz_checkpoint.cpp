// Fuzz entry: one rank's checkpoint file (run --checkpoint-dir, read by --resume) and the `latest`
// pointer beside it. Properties: a rejection is bad input naming the file; an accepted file's
// payload is exactly the size its header promises, and re-encoding its header in front of the
// same payload parses back to the same header.
#include <string>

#include "executor/runtime/checkpoint_format.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kReader = "checkpoint";
constexpr const char* kOrigin = "fuzz_rank_0.bin";
constexpr const char* kLatestOrigin = "fuzz_latest";

bool SameHeader(const parallax::executor::CheckpointHeader& a, const parallax::executor::CheckpointHeader& b) {
  return parallax::executor::EncodeCheckpointHeader(a) == parallax::executor::EncodeCheckpointHeader(b);
}
}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax;
  using namespace parallax::fuzz;
  using namespace parallax::executor;
  const std::string bytes = Text(data, size);
  auto latest = ParseLatestPointer(bytes, kLatestOrigin);
  if (latest) {
    NoteAccepted();
    if (*latest < 0) Violation(kReader, "negative step in latest", bytes);
    return 0;
  }
  CheckBadInput(kReader, latest.error(), kLatestOrigin);
  auto file = ParseCheckpoint(bytes, kOrigin);
  if (!file) {
    CheckBadInput(kReader, file.error(), kOrigin);
    return 0;
  }
  NoteAccepted();
  const std::string payload = bytes.substr(file->payload_offset);
  if (static_cast<int64_t>(payload.size()) != CheckpointPayloadBytes(file->header)) {
    Violation(kReader, "accepted a payload of the wrong size", std::to_string(payload.size()));
  }
  auto again = ParseCheckpoint(EncodeCheckpointHeader(file->header) + payload, "written");
  if (!again) Violation(kReader, "own header does not reload", again.error().message);
  if (!SameHeader(again->header, file->header)) Violation(kReader, "round trip changed the header", bytes);
  return 0;
}
