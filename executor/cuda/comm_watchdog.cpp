#include "executor/cuda/comm_watchdog.h"

#include <algorithm>

#include "executor/cuda/cuda_check.h"

namespace parallax::executor::gpu {

int CommWatchdog::Register(NcclComm* comm, std::string label) {
  comms_.push_back(Registered{next_id_, comm, std::move(label)});
  return next_id_++;
}

void CommWatchdog::Unregister(int id) {
  comms_.erase(std::remove_if(comms_.begin(), comms_.end(), [id](const Registered& r) { return r.id == id; }),
               comms_.end());
}

Result<int64_t> CommWatchdog::NewEvent() {
  if (!free_.empty()) {
    const int64_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t ev = nullptr;
  PX_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  events_.emplace_back(ev);
  return static_cast<int64_t>(events_.size()) - 1;
}

Result<int64_t> CommWatchdog::Begin(cudaStream_t stream) {
  auto e = NewEvent();
  if (!e) return e.error();
  PX_CUDA_TRY(cudaEventRecord(events_[static_cast<size_t>(*e)].get(), stream));
  return *e;
}

Status CommWatchdog::End(int64_t token, cudaStream_t stream, std::string what, std::string who) {
  auto e = NewEvent();
  if (!e) return e.error();
  PX_CUDA_TRY(cudaEventRecord(events_[static_cast<size_t>(*e)].get(), stream));
  ops_.push_back(Op{token, *e, std::move(what), std::move(who), std::nullopt});
  return {};
}

void CommWatchdog::AbortAll(const Error& why) {
  if (!aborted_) aborted_ = why;
  for (Registered& r : comms_) r.comm->Abort();
}

Status CommWatchdog::Poll() {
  if (aborted_) return *aborted_;
  for (const Registered& r : comms_) {
    if (r.comm->get() == nullptr || r.comm->aborted()) continue;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(r.comm->get(), &async);
    const ncclResult_t bad = q != ncclSuccess ? q : async;
    if (bad != ncclSuccess && bad != ncclInProgress) {
      std::string call = "ncclCommGetAsyncError on the " + r.label + " communicator";
      if (!ops_.empty()) call += " during " + ops_.front().what;
      Error e = NcclError(bad, call.c_str(), __FILE__, __LINE__);
      e.message += "; NCCL communicators aborted";
      AbortAll(e);
      return e;
    }
  }
  const auto now = Clock::now();
  while (!ops_.empty()) {
    Op& op = ops_.front();
    const cudaError_t done = cudaEventQuery(events_[static_cast<size_t>(op.end)].get());
    if (done == cudaSuccess) {
      Recycle(op.start);
      Recycle(op.end);
      ops_.pop_front();
      continue;
    }
    if (done != cudaErrorNotReady) return CudaError(done, "cudaEventQuery", __FILE__, __LINE__);
    break;
  }
  for (Op& op : ops_) {
    if (!op.started) {
      const cudaError_t s = cudaEventQuery(events_[static_cast<size_t>(op.start)].get());
      if (s == cudaSuccess) op.started = now;
      if (s != cudaSuccess && s != cudaErrorNotReady) return CudaError(s, "cudaEventQuery", __FILE__, __LINE__);
      continue;
    }
    if (std::chrono::duration<double>(now - *op.started).count() <= timeout_s_) continue;
    const int rank = LaunchRank();
    Error e{(rank >= 0 ? "rank " + std::to_string(rank) + " on " : std::string()) + HostName() + ": NCCL " + op.what +
                " got no answer from " + op.who + " within " + std::to_string(static_cast<int>(timeout_s_)) +
                " s: lost rank (" + op.who + " died or is stuck); NCCL communicators aborted (ncclCommAbort)",
            ErrorKind::kInternal};
    AbortAll(e);
    return e;
  }
  return {};
}

}  // namespace parallax::executor::gpu
