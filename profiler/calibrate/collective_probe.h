#pragma once
// One collective over one group of ranks at one message size, enqueued on the backend's DP comm
// stream (the stream the executor's gradient collectives use) and timed with its events. Sizes
// follow nccl-tests: all-gather and reduce-scatter name the full (gathered / unreduced) buffer,
// send/recv the bytes each rank sends (to the next rank of the group, receiving from the previous:
// nccl-tests' sendrecv_perf ring). Every member of every group of the split runs it at once.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "model/cost_db.h"
#include "model/result.h"

namespace parallax::profiler {

class CollectiveProbe {
 public:
  CollectiveProbe(CollectiveKind kind, int64_t bytes, executor::Communicator& group, executor::Communicator& world)
      : kind_(kind), bytes_(bytes), group_(group), world_(world) {}
  //! Allocates the buffers (once).
  Status Prepare(executor::Backend& backend);
  //! `n` timed runs, each after a world barrier so every group starts together.
  Result<std::vector<double>> Measure(executor::Backend& backend, int64_t n);
  //! Prepares and enqueues one run without timing it (a collective beside timed compute).
  Status EnqueueOnly(executor::Backend& backend) {
    PX_TRY(Prepare(backend));
    return Enqueue(backend);
  }
  void Release() {
    send_.Reset();
    recv_.Reset();
  }

 private:
  Status Enqueue(executor::Backend& backend);
  CollectiveKind kind_;
  int64_t bytes_;
  executor::Communicator& group_;
  executor::Communicator& world_;
  executor::Tensor send_, recv_;
};

}  // namespace parallax::profiler
