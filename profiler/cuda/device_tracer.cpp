// StartDeviceTracer on every build: the CUPTI tracer where CUDA was built in, else a clear reason.
#include <string>

#include "profiler/cuda/cupti_tracer.h"

namespace parallax::profiler {

#ifdef PARALLAX_WITH_CUPTI
Result<std::unique_ptr<executor::DeviceActivity>> StartCuptiTracer(const DeviceTracerOptions& options);
#endif

std::string CuptiVersionProblem(uint32_t library_version, uint32_t built_against) {
  if (library_version >= built_against) return {};
  return "libcupti API version " + std::to_string(library_version) + " is older than " +
         std::to_string(built_against) + ", the version parallax was built against";
}

Result<std::unique_ptr<executor::DeviceActivity>> StartDeviceTracer(const std::string& backend,
                                                                    const DeviceTracerOptions& options) {
  if (backend != "cuda") return BadInput("device tracing needs --backend cuda (backend " + backend + " is timed by host clocks)");
  if (options.buffer_bytes < (64LL << 10)) return BadInput("CUPTI buffers must be at least 64 KiB");
#ifdef PARALLAX_WITH_CUPTI
  return StartCuptiTracer(options);
#else
  return IoError("this parallax was built without CUDA, so it has no CUPTI tracer");
#endif
}

}  // namespace parallax::profiler
