#pragma once
// A communicator of one rank on CPU streams: collectives are copies run in stream order, a send
// is kept until the receive with its tag takes it.

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

  Status HostAllReduce(double*, int64_t, ReduceOp) override { return {}; }
  Status HostAllGather(const void* send, void* recv, int64_t bytes) override;
  Status Barrier() override { return {}; }

  Status AllReduce(DevPtr data, int64_t count, ReduceOp op, Stream& stream) override;
  Status ReduceScatter(DevPtr send, DevPtr recv, int64_t recv_count, Stream& stream) override;
  Status AllGather(DevPtr send, DevPtr recv, int64_t send_count, Stream& stream) override;
  Status Broadcast(DevPtr data, int64_t count, int root, Stream& stream) override;
  void GroupStart() override {}
  Status GroupEnd() override { return {}; }
  Status Send(DevPtr data, int64_t count, int peer, int tag, Stream& stream) override;
  Status Recv(DevPtr data, int64_t count, int peer, int tag, Stream& stream) override;

  Result<std::unique_ptr<Communicator>> Split(const std::vector<int>& ranks) override;
  void Abort(int) override {}

 private:
  std::map<int, std::deque<std::vector<char>>> queued_;  // by tag
};

}  // namespace parallax::executor
