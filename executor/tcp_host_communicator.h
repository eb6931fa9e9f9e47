#pragma once
// The host plane of a job started without MPI (torchrun, Slurm, Kubernetes): host collectives
// over the TCP rendezvous (rendezvous.h), sub-groups from its Split. It carries no device plane
// (that is NCCL's, cuda/nccl_communicator.h): its device calls return an error.

#include <memory>
#include <vector>

#include "executor/backend.h"
#include "executor/rendezvous.h"

namespace parallax::executor {

class TcpHostCommunicator final : public Communicator {
 public:
  //! `world_ranks[r]` = the world rank of member r.
  TcpHostCommunicator(std::unique_ptr<Rendezvous> rendezvous, std::vector<int> world_ranks);

  int rank() const override { return rv_->rank(); }
  int size() const override { return rv_->world_size(); }
  int WorldRank(int r) const override { return world_ranks_[static_cast<size_t>(r)]; }

  //! Every rank reduces the gathered values in rank order, so all get bit-identical results.
  Status HostAllReduce(double* data, int64_t count, ReduceOp op) override;
  Status HostAllGather(const void* send, void* recv, int64_t bytes) override;
  Status Barrier() override { return rv_->Barrier(); }

  Status AllReduce(DevPtr, int64_t, ReduceOp, Stream&) override { return NoDevicePlane(); }
  Status ReduceScatter(DevPtr, DevPtr, int64_t, Stream&) override { return NoDevicePlane(); }
  Status AllGather(DevPtr, DevPtr, int64_t, Stream&) override { return NoDevicePlane(); }
  Status Broadcast(DevPtr, int64_t, int, Stream&) override { return NoDevicePlane(); }
  void GroupStart() override {}
  Status GroupEnd() override { return {}; }
  Status Send(DevPtr, int64_t, int, int, Stream&) override { return NoDevicePlane(); }
  Status Recv(DevPtr, int64_t, int, int, Stream&) override { return NoDevicePlane(); }

  Result<std::unique_ptr<Communicator>> Split(const std::vector<int>& ranks) override;
  //! Ends this process at once; the peers see their connections close and fail naming it.
  void Abort(int exit_code) override;

 private:
  static Status NoDevicePlane();

  std::unique_ptr<Rendezvous> rv_;
  std::vector<int> world_ranks_;
};

}  // namespace parallax::executor
