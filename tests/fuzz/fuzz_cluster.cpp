// Fuzz entry: cluster JSON. Properties: a rejection is bad input naming the file; an accepted
// cluster writes JSON that reads back to the same cluster.
#include "model/cluster_spec.h"
#include "model/json_io.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kReader = "cluster";
constexpr const char* kOrigin = "fuzz_cluster.json";
}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax;
  using namespace parallax::fuzz;
  auto j = ParseJsonText(Text(data, size), kOrigin);
  if (!j) {
    CheckBadInput(kReader, j.error(), kOrigin);
    return 0;
  }
  auto c = ClusterFromJson(*j, kOrigin);
  if (!c) {
    CheckBadInput(kReader, c.error(), kOrigin);
    return 0;
  }
  NoteAccepted();
  const Json out = ClusterToJson(*c);
  auto again = ClusterFromJson(out, "written");
  if (!again) Violation(kReader, "own output does not reload", again.error().message);
  if (ClusterToJson(*again) != out) Violation(kReader, "round trip changed the cluster", out.dump());
  return 0;
}
