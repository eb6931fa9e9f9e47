// Fuzz entry: the inline plan form (--plan dp=2,tp=2,...) and --fix strings, which share its
// syntax. Properties: a rejection is bad input naming "plan" / "--fix"; an accepted layout prints
// an inline form that parses back to the same layout.
#include "model/plan.h"
#include "planner/search/constraints.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kReader = "inline_plan";
}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax;
  using namespace parallax::fuzz;
  const std::string text = Text(data, size);
  auto fix = planner::ParseConstraints(text);
  if (!fix) CheckBadInput(kReader, fix.error(), "--fix");
  auto l = ParseInlineLayout(text);
  if (!l) {
    CheckBadInput(kReader, l.error(), "plan");
    return 0;
  }
  NoteAccepted();
  const std::string printed = LayoutToString(*l);
  auto again = ParseInlineLayout(printed);
  if (!again) Violation(kReader, "printed layout does not parse", printed + ": " + again.error().message);
  if (LayoutToJson(*again) != LayoutToJson(*l)) Violation(kReader, "round trip changed the layout", printed);
  return 0;
}
