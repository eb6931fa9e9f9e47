#pragma once
// DeviceSpec: one accelerator (or the CPU) with datasheet figures.

#include <string>

#include "model/json_io.h"

namespace parallax {

enum class DType { kFp32, kTf32, kBf16, kFp16, kFp8 };

//! Dense (non-sparse) peak throughput per data type, TFLOP/s. 0 means not supported.
struct PeakTflops {
  double fp32 = 0;
  double tf32 = 0;
  double bf16 = 0;
  double fp16 = 0;
  double fp8 = 0;
  double For(DType t) const;
};

struct DeviceSpec {
  std::string name;
  PeakTflops peak_tflops;
  double memory_GiB = 0;  //!< usable device memory
  double hbm_GBps = 0;    //!< memory bandwidth, GB/s (1e9 bytes)

  int64_t memory_bytes() const { return static_cast<int64_t>(memory_GiB * 1024.0 * 1024.0 * 1024.0); }
};

Result<DeviceSpec> DeviceFromJson(const Json& j, const std::string& file, const std::string& path);
Json DeviceToJson(const DeviceSpec& d);

const char* ToString(DType t);
Result<DType> DTypeFromString(const std::string& s);

}  // namespace parallax
