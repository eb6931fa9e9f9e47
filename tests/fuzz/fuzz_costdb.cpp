// Fuzz entry: cost database JSON (parallax calibrate -o). Properties: a rejection is bad input
// naming the file; an accepted database writes JSON that reads back to the same database.
#include "model/cost_db.h"
#include "model/json_io.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kReader = "costdb";
constexpr const char* kOrigin = "fuzz_costdb.json";
}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax;
  using namespace parallax::fuzz;
  auto j = ParseJsonText(Text(data, size), kOrigin);
  if (!j) {
    CheckBadInput(kReader, j.error(), kOrigin);
    return 0;
  }
  auto db = CostDbFromJson(*j, kOrigin);
  if (!db) {
    CheckBadInput(kReader, db.error(), kOrigin);
    return 0;
  }
  NoteAccepted();
  const Json out = CostDbToJson(*db);
  auto again = CostDbFromJson(out, "written");
  if (!again) Violation(kReader, "own output does not reload", again.error().message);
  if (CostDbToJson(*again) != out) Violation(kReader, "round trip changed the database", out.dump());
  return 0;
}
