#pragma once
// A communicator of one rank: collectives are copies, sends queue until received.

#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "executor/backend.h"

namespace parallax::executor {

class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int WorldRank(int) const override { return 0; }
  Status AllReduce(float*, int64_t, ReduceOp) override { return {}; }
  Status AllReduce(double*, int64_t, ReduceOp) override { return {}; }
  Status ReduceScatter(const float* send, float* recv, int64_t recv_count) override;
  Status AllGather(const float* send, float* recv, int64_t send_count) override;
  Status Broadcast(float*, int64_t, int) override { return {}; }
  Status Send(const float* data, int64_t count, int peer, int tag) override;
  Status Recv(float* data, int64_t count, int peer, int tag) override;
  Status FlushSends() override { return {}; }
  Status Barrier() override { return {}; }
  Result<std::unique_ptr<CommRequest>> IAllReduce(float* data, int64_t count) override;
  Result<std::unique_ptr<CommRequest>> IReduceScatter(const float* send, float* recv,
                                                      int64_t recv_count) override;
  Result<std::unique_ptr<Communicator>> Split(const std::vector<int>& ranks) override;
  void Abort(int) override {}

 private:
  std::map<int, std::deque<std::vector<float>>> queued_;  // by tag
};

}  // namespace parallax::executor
