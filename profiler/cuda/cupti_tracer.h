#pragma once
// The CUPTI tracer: device activity for `parallax run --backend cuda --trace` (and calibrate).
//
// CUPTI's Activity API records CONCURRENT_KERNEL, MEMCPY, MEMSET, RUNTIME, SYNCHRONIZATION and
// EXTERNAL_CORRELATION records into buffers we hand it (buffer callbacks); the op recorder brackets
// each op with an external correlation id (CUSTOM0 = the op's key), so every kernel, NCCL's
// included, is attributed to the op that launched it (executor/runtime/device_timeline.h).
//
// libcupti is loaded at run time (dlopen), never linked: a machine without it, or with one older
// than the headers this was built against, still runs; StartDeviceTracer says why once and the
// recorder times ops with CUDA events instead. Records CUPTI could not store (every buffer full)
// are counted and reported as dropped, never hidden.
//
// One tracer per process (CUPTI's buffer callbacks carry no user pointer). Built only with CUDA;
// elsewhere StartDeviceTracer returns an error naming the reason.

#include <cstdint>
#include <memory>
#include <string>

#include "executor/device_activity.h"
#include "model/result.h"

namespace parallax::profiler {

struct DeviceTracerOptions {
  //! libcupti to load; empty: "libcupti.so", then the toolkit's versioned names.
  std::string library;
  //! Bytes per activity buffer (CUPTI fills one, hands it back, asks for the next).
  int64_t buffer_bytes = 8LL << 20;
};

//! Starts device activity tracing for `backend` ("cuda"). Errors: not built with CUDA, libcupti
//! missing or too old, CUPTI refusing (no driver or device). Nothing stays enabled on error.
Result<std::unique_ptr<executor::DeviceActivity>> StartDeviceTracer(const std::string& backend,
                                                                    const DeviceTracerOptions& options = {});

//! The CUPTI version check: a library older than the headers this was built against is too old
//! (its records would not have the layout we read). Empty message: fine.
std::string CuptiVersionProblem(uint32_t library_version, uint32_t built_against);

}  // namespace parallax::profiler
