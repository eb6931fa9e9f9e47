#pragma once
// The NCCL watchdog of one rank (shared by the CUDA backend and its NCCL communicators). Every
// NCCL operation is bracketed by two events on its stream; whenever the host waits (stream or
// event synchronisation, a copy to the host) the backend polls here:
//  - ncclCommGetAsyncError of every live communicator: an asynchronous NCCL error (a peer's
//    connection closed, a remote failure) ends the job's communicators and names the call;
//  - an operation whose start event completed more than `timeout_s` ago and whose end event has
//    not: a peer never arrived. Every communicator is aborted (ncclCommAbort, which also stops the
//    stuck kernels so the host wait returns) and the error names the lost rank and the call.
// After an abort every later NCCL call fails fast with the first error.

#include <cuda_runtime.h>

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "executor/cuda/cuda_handles.h"
#include "model/result.h"

namespace parallax::executor::gpu {

class CommWatchdog {
 public:
  explicit CommWatchdog(double timeout_s) : timeout_s_(timeout_s) {}
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;

  double timeout_s() const { return timeout_s_; }
  //! Shortens or lengthens the timeout (the smallest timeout asked for by ConnectWorld wins).
  void set_timeout_s(double t) { timeout_s_ = t; }

  //! A communicator to poll and to abort; returns its id for Unregister.
  int Register(NcclComm* comm, std::string label);
  void Unregister(int id);

  //! Records the start of an operation on `stream` (before the NCCL call).
  Result<int64_t> Begin(cudaStream_t stream);
  //! Records its end (after the call). `what` names the call ("all-reduce of 4096 bf16 on the
  //! dp-comm stream"), `who` the peers it waits for ("rank 3", "one of ranks [1,2,3]").
  Status End(int64_t token, cudaStream_t stream, std::string what, std::string who);

  //! Non-blocking check (see above). Completed operations are forgotten.
  Status Poll();
  //! Aborts every registered communicator (idempotent) and remembers `why` as the first error.
  void AbortAll(const Error& why);
  bool aborted() const { return aborted_.has_value(); }
  //! The error that caused the abort.
  Error abort_reason() const { return aborted_ ? *aborted_ : Error{"not aborted", ErrorKind::kInternal}; }
  //! Operations not yet seen complete.
  int64_t pending() const { return static_cast<int64_t>(ops_.size()); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Op {
    int64_t start = -1, end = -1;  // indices into events_
    std::string what, who;
    std::optional<Clock::time_point> started;
  };
  struct Registered {
    int id;
    NcclComm* comm;
    std::string label;
  };
  Result<int64_t> NewEvent();
  void Recycle(int64_t e) { free_.push_back(e); }

  double timeout_s_;
  std::vector<EventPtr> events_;
  std::vector<int64_t> free_;
  std::deque<Op> ops_;
  std::vector<Registered> comms_;
  int next_id_ = 0;
  std::optional<Error> aborted_;
};

}  // namespace parallax::executor::gpu
