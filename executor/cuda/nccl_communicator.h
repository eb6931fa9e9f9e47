#pragma once
// NcclCommunicator: the CUDA backend's communicator. Device plane = NCCL (collectives and grouped
// send/recv enqueued on the backend's CUDA streams; fp32, bf16, fp16, plus fp64/int32);
// host plane = the launch's host communicator (MPI from executor/cpu/mpi_communicator; without
// MPI the TCP rendezvous of executor/tcp_host_communicator; or the single-process one), which
// also carries the bootstrap: rank 0's ncclUniqueId reaches every
// rank through a host all-gather. Sub-groups come from ncclCommSplit (colour = the group's lowest
// rank, key = the position in the group) together with a split of the host communicator.
//
// Communicators are non-blocking (ncclConfig_t.blocking = 0): initialisation, split and any call
// that returns ncclInProgress are polled under the watchdog's timeout instead of blocking, and
// every enqueued operation is registered with the backend's CommWatchdog (comm_watchdog.h), so a
// lost peer becomes an error naming it and the call, and the communicators are aborted.

#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/comm_watchdog.h"
#include "executor/cuda/cuda_handles.h"
#include "executor/launch.h"

namespace parallax::executor {
class CudaBackend;
}

namespace parallax::executor::gpu {

class NcclCommunicator final : public Communicator {
 public:
  //! The job's communicator over every rank of `launch` (collective over the job).
  static Result<std::unique_ptr<Communicator>> World(LaunchContext& launch, CudaBackend& backend, double timeout_s);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int WorldRank(int r) const override { return host_->WorldRank(r); }

  Status HostAllReduce(double* data, int64_t count, ReduceOp op) override { return host_->HostAllReduce(data, count, op); }
  Status HostAllGather(const void* send, void* recv, int64_t bytes) override {
    return host_->HostAllGather(send, recv, bytes);
  }
  Status Barrier() override { return host_->Barrier(); }

  Status AllReduce(DevPtr data, int64_t count, ReduceOp op, Stream& stream) override;
  Status ReduceScatter(DevPtr send, DevPtr recv, int64_t recv_count, Stream& stream) override;
  Status AllGather(DevPtr send, DevPtr recv, int64_t send_count, Stream& stream) override;
  Status Broadcast(DevPtr data, int64_t count, int root, Stream& stream) override;
  void GroupStart() override { ++group_depth_; }
  Status GroupEnd() override;
  Status Send(DevPtr data, int64_t count, int peer, int tag, Stream& stream) override;
  Status Recv(DevPtr data, int64_t count, int peer, int tag, Stream& stream) override;

  Result<std::unique_ptr<Communicator>> Split(const std::vector<int>& ranks) override;
  //! Aborts every NCCL communicator of this rank, then the job (MPI_Abort through the host plane).
  void Abort(int exit_code) override;

 private:
  NcclCommunicator(std::unique_ptr<Communicator> host, NcclComm comm, std::shared_ptr<CommWatchdog> watchdog,
                   std::string label);
  //! Finishes an NCCL call: ncclInProgress is polled to completion under the timeout.
  Status Finish(ncclResult_t r, const char* call, const char* file, int line);
  //! Polls ncclCommGetAsyncError(comm) until it leaves ncclInProgress, at most the timeout.
  static Status WaitReady(ncclComm_t comm, CommWatchdog& wd, const std::string& what, const std::string& who);
  //! Brackets an enqueued operation with watchdog events.
  template <class Call>
  Status Enqueue(Stream& stream, const std::string& what, const std::string& who, Call call);
  //! "rank N" for a peer, "one of ranks [..]" for the other members.
  std::string Peer(int r) const;
  std::string Others() const;

  struct P2p {
    bool send = false;
    DevPtr data;
    int64_t count = 0;
    int peer = 0;
    Stream* stream = nullptr;
  };

  std::unique_ptr<Communicator> host_;
  NcclComm comm_;
  std::shared_ptr<CommWatchdog> watchdog_;
  std::string label_;
  int watch_id_ = -1;
  int group_depth_ = 0;
  std::vector<P2p> group_;
};

}  // namespace parallax::executor::gpu
