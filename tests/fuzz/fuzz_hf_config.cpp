// Fuzz entry: a Hugging Face config.json imported as a model. Properties: a rejection is bad input
// naming the file; an imported model writes our model JSON, which reads back to the same model.
#include "model/hf_import.h"
#include "model/json_io.h"
#include "model/model_spec.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kReader = "hf_config";
constexpr const char* kOrigin = "config.json";
}  // namespace

PARALLAX_FUZZ_TARGET(kReader) {
  using namespace parallax;
  using namespace parallax::fuzz;
  auto j = ParseJsonText(Text(data, size), kOrigin);
  if (!j) {
    CheckBadInput(kReader, j.error(), kOrigin);
    return 0;
  }
  (void)LooksLikeHfConfig(*j);
  auto m = ModelFromHfConfig(*j, kOrigin);
  if (!m) {
    CheckBadInput(kReader, m.error(), kOrigin);
    return 0;
  }
  NoteAccepted();
  const Json out = ModelToJson(*m);
  auto again = ModelFromJson(out, "written");
  if (!again) Violation(kReader, "imported model does not reload as our JSON", again.error().message);
  if (ModelToJson(*again) != out) Violation(kReader, "round trip changed the model", out.dump());
  return 0;
}
