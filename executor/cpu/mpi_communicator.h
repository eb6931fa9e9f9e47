#pragma once
// Communicator over MPI. Every call is checked (PX_MPI_CHECK: call, file, line, host) and every
// blocking wait is a non-blocking operation polled under a watchdog: a peer that never answers
// becomes an error naming it after `timeout_s`, so a lost rank never hangs the job.

#include <mpi.h>

#include <list>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"

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
  //! Wraps MPI_COMM_WORLD (not freed) with MPI_ERRORS_RETURN.
  static Result<std::unique_ptr<MpiCommunicator>> World(double timeout_s);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int WorldRank(int r) const override { return world_ranks_[static_cast<size_t>(r)]; }

  Status AllReduce(float* data, int64_t count, ReduceOp op) override;
  Status AllReduce(double* data, int64_t count, ReduceOp op) override;
  Status ReduceScatter(const float* send, float* recv, int64_t recv_count) override;
  Status AllGather(const float* send, float* recv, int64_t send_count) override;
  Status Broadcast(float* data, int64_t count, int root) override;
  Status Send(const float* data, int64_t count, int peer, int tag) override;
  Status Recv(float* data, int64_t count, int peer, int tag) override;
  Status FlushSends() override;
  Status Barrier() override;
  Result<std::unique_ptr<CommRequest>> IAllReduce(float* data, int64_t count) override;
  Result<std::unique_ptr<CommRequest>> IReduceScatter(const float* send, float* recv,
                                                      int64_t recv_count) override;
  Result<std::unique_ptr<Communicator>> Split(const std::vector<int>& ranks) override;
  void Abort(int exit_code) override;

  //! Polls `req` until done or the watchdog fires; `peer` = -1 for collectives (all members named).
  Status Wait(MPI_Request* req, const char* what, int peer);

 private:
  MpiCommunicator(MPI_Comm comm, bool owned, double timeout_s);
  Status Reap();
  //! The peers a stuck collective may be waiting on: "rank N", or "one of ranks [..]" (self excluded).
  std::string Members() const;

  struct PendingSend {
    std::vector<float> data;
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = 0;
  };

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 60;
  std::vector<int> world_ranks_;
  std::list<PendingSend> sends_;
};

}  // namespace parallax::executor
