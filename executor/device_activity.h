#pragma once
// DeviceActivity: the seam between the executor's op recorder and a device-side activity tracer
// (CUPTI on CUDA, profiler/cuda/cupti_tracer.h). The recorder brackets every op with EnterOp/ExitOp
// (the tracer tags the runtime calls made in between with the op's key: CUPTI external
// correlation ids), and once per step drains the records the device finished; device_timeline.h
// turns them into GPU-timed ops, kernel slices, host launch slices and launch->kernel flows.
// Plain data only: this header compiles (and its consumers are tested) without CUDA.

#include <cstdint>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::executor {

enum class ActivityKind : uint8_t {
  kKernel,   //!< a device kernel (CUPTI CONCURRENT_KERNEL)
  kMemcpy,   //!< a copy (MEMCPY)
  kMemset,   //!< a fill (MEMSET)
  kRuntime,  //!< a host runtime call (RUNTIME: cudaLaunchKernel, cudaMemcpyAsync, ...)
  kSync,     //!< a host wait on the device (SYNCHRONIZATION)
};
//! The trace category of a record, as Kineto writes it: "kernel", "gpu_memcpy", "gpu_memset",
//! "cuda_runtime", "cuda_sync".
const char* ToString(ActivityKind k);

//! One record, in the tracer's own clock (nanoseconds).
struct ActivityRecord {
  ActivityKind kind = ActivityKind::kKernel;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation = 0;  //!< links a runtime call to the device work it launched (0: none)
  uint32_t stream = 0;       //!< device stream id (device work); host thread id (runtime, sync)
  int64_t bytes = -1;        //!< memcpy / memset size
  std::string name;          //!< kernel name (device work), API name (runtime), sync type
};

//! A runtime call's correlation id, tagged with the key of the op that was open when it was made.
struct ExternalLink {
  uint32_t correlation = 0;
  uint64_t op_key = 0;
};

struct ActivityStats {
  int64_t records = 0;  //!< records delivered
  int64_t dropped = 0;  //!< records the tracer lost (full buffers); reported, never hidden
  int64_t buffers = 0;  //!< buffers completed
};

class DeviceActivity {
 public:
  virtual ~DeviceActivity() = default;
  //! "cupti", ...
  virtual std::string source() const = 0;
  //! Work launched from this thread until ExitOp belongs to op `key` (keys are never 0).
  virtual void EnterOp(uint64_t key) = 0;
  virtual void ExitOp() = 0;
  //! Appends every record the device has finished (the caller has waited for the work) and the
  //! op links seen since the last call.
  virtual Status Drain(std::vector<ActivityRecord>& records, std::vector<ExternalLink>& links) = 0;
  virtual ActivityStats stats() const = 0;
};

}  // namespace parallax::executor
