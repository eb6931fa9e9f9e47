#include "model/training_spec.h"

namespace parallax {

int64_t BytesPerElement(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

const char* ToString(Precision p) {
  switch (p) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp32: return "fp32";
    case Precision::kFp8: return "fp8";
  }
  return "?";
}

Result<Precision> PrecisionFromString(std::string_view s) {
  constexpr Precision kAll[] = {Precision::kBf16, Precision::kFp16, Precision::kFp32, Precision::kFp8};
  std::string accepted;
  for (Precision p : kAll) {
    if (s == ToString(p)) return p;
    accepted += (accepted.empty() ? "" : ", ") + std::string(ToString(p));
  }
  return BadInput("unknown precision \"" + std::string(s) + "\" (expected one of " + accepted + ")");
}

Result<TrainingSpec> TrainingFromJson(const Json& j, const std::string& file, const std::string& path) {
  return CatchJsonErrors([&]() -> Result<TrainingSpec> {
    ObjectReader r(j, file, path);
    TrainingSpec t;
    t.global_batch = r.NonNegativeInt("global_batch", 0);
    t.seq_len = r.NonNegativeInt("seq_len", 0);
    if (r.Has("precision")) {
      auto p = PrecisionFromString(r.String("precision"));
      if (!p) r.Fail("precision", p.error().message);
      t.precision = *p;
    }
    t.lr = r.PositiveNumber("lr", t.lr);
    t.weight_decay = r.NonNegativeNumber("weight_decay", t.weight_decay);
    t.grad_clip = r.NonNegativeNumber("grad_clip", t.grad_clip);
    t.adam_beta1 = r.NonNegativeNumber("adam_beta1", t.adam_beta1);
    t.adam_beta2 = r.NonNegativeNumber("adam_beta2", t.adam_beta2);
    t.adam_eps = r.PositiveNumber("adam_eps", t.adam_eps);
    t.seed = r.NonNegativeInt("seed", t.seed);
    if (t.adam_beta1 >= 1) r.Fail("adam_beta1", "must be < 1");
    if (t.adam_beta2 >= 1) r.Fail("adam_beta2", "must be < 1");
    r.Finish();
    return t;
  });
}

Json TrainingToJson(const TrainingSpec& t) {
  return Json{{"global_batch", t.global_batch}, {"seq_len", t.seq_len},
              {"precision", ToString(t.precision)}, {"lr", t.lr},
              {"weight_decay", t.weight_decay}, {"grad_clip", t.grad_clip},
              {"adam_beta1", t.adam_beta1}, {"adam_beta2", t.adam_beta2},
              {"adam_eps", t.adam_eps}, {"seed", t.seed}};
}

}  // namespace parallax
