#pragma once
// Communicator over MPI for the CPU backend. Every call is checked (PX_MPI_CHECK: call, file,
// line, host). Host-plane calls are non-blocking operations polled under a watchdog; device-plane
// calls become operations of a CPU comm stream (MPI non-blocking collectives and point-to-point,
// started in stream order and progressed by the stream engine). A peer that never answers becomes
// an error naming it after `timeout_s`, so a lost rank never hangs the job. Host and device planes
// use separate MPI communicators, so their collectives never interleave.

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/cpu/liveness.h"

namespace parallax::executor {

//! Turns a failed MPI call into an Error naming the call, source location and host.
Error MpiError(int code, const char* call, const char* file, int line);

#define PX_MPI_CHECK(call)                                                             \
  do {                                                                                 \
    const int px_rc_ = (call);                                                         \
    if (px_rc_ != MPI_SUCCESS) return ::parallax::executor::MpiError(px_rc_, #call, __FILE__, __LINE__); \
  } while (0)

class MpiCommunicator final : public Communicator {
 public:
  //! Duplicates MPI_COMM_WORLD (errors returned, not fatal).
  static Result<std::unique_ptr<MpiCommunicator>> World(double timeout_s);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int WorldRank(int r) const override { return world_ranks_[static_cast<size_t>(r)]; }

  Status HostAllReduce(double* data, int64_t count, ReduceOp op) override;
  Status HostAllGather(const void* send, void* recv, int64_t bytes) override;
  Status Barrier() override;

  Status AllReduce(DevPtr data, int64_t count, ReduceOp op, Stream& stream) override;
  Status ReduceScatter(DevPtr send, DevPtr recv, int64_t recv_count, Stream& stream) override;
  Status AllGather(DevPtr send, DevPtr recv, int64_t send_count, Stream& stream) override;
  Status Broadcast(DevPtr data, int64_t count, int root, Stream& stream) override;
  void GroupStart() override;
  Status GroupEnd() override;
  Status Send(DevPtr data, int64_t count, int peer, int tag, Stream& stream) override;
  Status Recv(DevPtr data, int64_t count, int peer, int tag, Stream& stream) override;

  Result<std::unique_ptr<Communicator>> Split(const std::vector<int>& ranks) override;
  void Abort(int exit_code) override;
  Result<std::unique_ptr<Mailbox>> OpenMailbox() override;

  //! Polls `req` on the host until done or the watchdog fires; `peer` = -1 for collectives.
  Status Wait(MPI_Request* req, const char* what, int peer);
  //! The watchdog's verdict on an operation that did not complete: names the lost peer (for a
  //! collective, the members that do not answer a liveness ping).
  Error Lost(const char* what, int peer);
  //! Answers liveness pings of other ranks (called from every wait).
  void ServeLiveness() { liveness_->Serve(); }
  double timeout_s() const { return timeout_s_; }

 private:
  MpiCommunicator(MPI_Comm comm, MPI_Comm host_comm, double timeout_s, std::shared_ptr<Liveness> liveness);
  //! The peers a stuck collective waits on: the silent members ("rank N"), or, when every member
  //! answers a ping, "one of ranks [..]" (self excluded).
  std::string Members();
  Status EnqueueOp(Stream& stream, std::unique_ptr<class MpiStreamOp> op);

  struct P2p {
    bool send = false;
    DevPtr data;
    int64_t count = 0;
    int peer = 0;
    int tag = 0;
    Stream* stream = nullptr;
  };

  MPI_Comm comm_ = MPI_COMM_NULL;       //!< device plane
  MPI_Comm host_comm_ = MPI_COMM_NULL;  //!< host plane
  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 60;
  std::vector<int> world_ranks_;
  std::shared_ptr<Liveness> liveness_;  //!< shared by the world and every group split from it
  int group_depth_ = 0;
  std::vector<P2p> group_;
};

}  // namespace parallax::executor
