// Fuzz entry: plan JSON (parallax plan -o). Properties: a rejection is bad input naming the file;
// an accepted plan writes JSON that reads back to the same plan.
#include "model/json_io.h"
#include "model/plan.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kReader = "plan";
constexpr const char* kOrigin = "fuzz_plan.json";
}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax;
  using namespace parallax::fuzz;
  auto j = ParseJsonText(Text(data, size), kOrigin);
  if (!j) {
    CheckBadInput(kReader, j.error(), kOrigin);
    return 0;
  }
  auto p = PlanFromJson(*j, kOrigin);
  if (!p) {
    CheckBadInput(kReader, p.error(), kOrigin);
    return 0;
  }
  NoteAccepted();
  const Json out = PlanToJson(*p);
  auto again = PlanFromJson(out, "written");
  if (!again) Violation(kReader, "own output does not reload", again.error().message);
  if (PlanToJson(*again) != out) Violation(kReader, "round trip changed the plan", out.dump());
  return 0;
}
