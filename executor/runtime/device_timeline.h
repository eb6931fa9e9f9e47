#pragma once
// Device timeline: attributes a device tracer's records (executor/device_activity.h) to the ops the
// recorder timed with events, and moves everything onto the recorder's clock.
//
// - Each device record (kernel, memcpy, memset) belongs to the op whose key tagged the runtime call
//   that launched it (external correlation). NCCL kernels, launched inside a collective's scope,
//   belong to that collective.
// - An op with device records is re-timed from them: start = first record's start, duration up to
//   the last record's end (the GPU time, not the host's launch time nor an event's).
// - The tracer's clock is aligned to the recorder's by the median, over ops with records, of
//   (event-timed start - first record start): events are recorded on the op's stream just before
//   its first launch, so the two agree up to the event's own resolution.
// GPU-free: tested with synthetic records (tests/executor/device_timeline_test.cpp).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "executor/device_activity.h"
#include "executor/runtime/op_recorder.h"

namespace parallax::executor {

//! One record on the recorder's clock, ready for the trace.
struct DeviceSlice {
  ActivityKind kind = ActivityKind::kKernel;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  uint32_t stream = 0;        //!< device stream id, or host thread id (runtime, sync)
  int64_t op = -1;            //!< index into the ops passed in; -1: not inside any recorded op
  int64_t launch_ns = -1;     //!< start of the runtime call that launched it (device work); -1: unknown
  uint32_t launch_thread = 0;
  int64_t bytes = -1;
  bool nccl = false;          //!< an NCCL kernel
  std::string name;
};

struct TimelineSummary {
  int64_t clock_offset_ns = 0;      //!< recorder time = tracer time + offset
  bool aligned = false;             //!< offset measured from ops (false: `fallback_offset_ns` used)
  int64_t device_records = 0;       //!< kernels, copies and fills
  int64_t attributed = 0;           //!< of which inside a recorded op
  int64_t ops_retimed = 0;          //!< ops whose times now come from their device records
  int64_t nccl_kernels = 0;
  int64_t nccl_in_collectives = 0;  //!< NCCL kernels attributed to a communication op
};

//! Attributes `records` to `ops` (ops[i] carries key `first_key + i`, as the recorder numbers its
//! ops), re-times the ops that have device records, and appends every record to `slices` on the
//! recorder's clock. `fallback_offset_ns` is used when no op has both an event time and a device
//! record.
TimelineSummary BuildDeviceTimeline(std::span<const ActivityRecord> records, std::span<const ExternalLink> links,
                                    uint64_t first_key, std::span<MeasuredOp> ops,
                                    std::vector<DeviceSlice>& slices, int64_t fallback_offset_ns = 0);

//! True for NCCL's device kernels ("ncclKernel_...", "ncclDevKernel_...").
bool IsNcclKernel(std::string_view name);

}  // namespace parallax::executor
