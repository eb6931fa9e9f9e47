// Fuzz entry: our model JSON ("kind": "model"). Properties: a rejection is bad input naming the
// file; an accepted model writes JSON that reads back to the same model.
#include "model/json_io.h"
#include "model/model_spec.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kReader = "model";
constexpr const char* kOrigin = "fuzz_model.json";
}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax;
  using namespace parallax::fuzz;
  auto j = ParseJsonText(Text(data, size), kOrigin);
  if (!j) {
    CheckBadInput(kReader, j.error(), kOrigin);
    return 0;
  }
  auto m = ModelFromJson(*j, kOrigin);
  if (!m) {
    CheckBadInput(kReader, m.error(), kOrigin);
    return 0;
  }
  NoteAccepted();
  const Json out = ModelToJson(*m);
  auto again = ModelFromJson(out, "written");
  if (!again) Violation(kReader, "own output does not reload", again.error().message);
  if (ModelToJson(*again) != out) Violation(kReader, "round trip changed the model", out.dump());
  return 0;
}
