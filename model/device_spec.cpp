#include "model/device_spec.h"

#include "model/presets.h"

namespace parallax {

double PeakTflops::For(DType t) const {
  switch (t) {
    case DType::kFp32: return fp32;
    case DType::kTf32: return tf32;
    case DType::kBf16: return bf16;
    case DType::kFp16: return fp16;
    case DType::kFp8: return fp8;
  }
  return 0;
}

const char* ToString(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kTf32: return "tf32";
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp8: return "fp8";
  }
  return "?";
}

Result<DType> DTypeFromString(const std::string& s) {
  for (DType t : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16, DType::kFp8}) {
    if (s == ToString(t)) return t;
  }
  return BadInput("unknown dtype \"" + s + "\" (expected fp32, tf32, bf16, fp16 or fp8)");
}

Result<DeviceSpec> DeviceFromJson(const Json& j, const std::string& file, const std::string& path) {
  return CatchJsonErrors([&]() -> Result<DeviceSpec> {
    if (j.is_string()) {
      const std::string name = j.get<std::string>();
      if (auto d = DevicePreset(name)) return *d;
      std::string names;
      for (const auto& n : DevicePresetNames()) names += (names.empty() ? "" : ", ") + n;
      return BadInput(file + ": " + path + ": unknown device preset \"" + name + "\" (known: " + names + ")");
    }
    ObjectReader r(j, file, path);
    DeviceSpec d;
    d.name = r.String("name");
    ObjectReader p = r.Object("peak_tflops");
    d.peak_tflops.fp32 = p.NonNegativeNumber("fp32", 0);
    d.peak_tflops.tf32 = p.NonNegativeNumber("tf32", 0);
    d.peak_tflops.bf16 = p.NonNegativeNumber("bf16", 0);
    d.peak_tflops.fp16 = p.NonNegativeNumber("fp16", 0);
    d.peak_tflops.fp8 = p.NonNegativeNumber("fp8", 0);
    p.Finish();
    if (d.peak_tflops.fp32 <= 0 && d.peak_tflops.bf16 <= 0 && d.peak_tflops.fp16 <= 0) {
      p.Fail("fp32", "at least one of fp32, bf16, fp16 must be > 0");
    }
    d.memory_GiB = r.PositiveNumber("memory_GiB");
    d.hbm_GBps = r.PositiveNumber("hbm_GBps");
    r.Finish();
    return d;
  });
}

Json DeviceToJson(const DeviceSpec& d) {
  return Json{{"name", d.name},
              {"peak_tflops",
               {{"fp32", d.peak_tflops.fp32},
                {"tf32", d.peak_tflops.tf32},
                {"bf16", d.peak_tflops.bf16},
                {"fp16", d.peak_tflops.fp16},
                {"fp8", d.peak_tflops.fp8}}},
              {"memory_GiB", d.memory_GiB},
              {"hbm_GBps", d.hbm_GBps}};
}

}  // namespace parallax
