#include "executor/cpu/local_communicator.h"

#include <cstring>

#include "executor/launch.h"

namespace parallax::executor {
namespace {
class DoneRequest final : public CommRequest {
 public:
  Status Wait() override { return {}; }
};
}  // namespace

Status SelfCommunicator::ReduceScatter(const float* send, float* recv, int64_t recv_count) {
  if (send != recv) std::memmove(recv, send, static_cast<size_t>(recv_count) * sizeof(float));
  return {};
}

Status SelfCommunicator::AllGather(const float* send, float* recv, int64_t send_count) {
  if (send != recv) std::memmove(recv, send, static_cast<size_t>(send_count) * sizeof(float));
  return {};
}

Status SelfCommunicator::Send(const float* data, int64_t count, int peer, int tag) {
  if (peer != 0) return Error{"send to rank " + std::to_string(peer) + " in a group of one", ErrorKind::kInternal};
  queued_[tag].emplace_back(data, data + count);
  return {};
}

Status SelfCommunicator::Recv(float* data, int64_t count, int peer, int tag) {
  auto it = queued_.find(tag);
  if (peer != 0 || it == queued_.end() || it->second.empty()) {
    return Error{"receive with tag " + std::to_string(tag) + " has no matching send (it would never complete)",
                 ErrorKind::kInternal};
  }
  std::vector<float>& msg = it->second.front();
  if (static_cast<int64_t>(msg.size()) != count) {
    return Error{"receive of " + std::to_string(count) + " floats matched a send of " + std::to_string(msg.size()),
                 ErrorKind::kInternal};
  }
  std::memcpy(data, msg.data(), msg.size() * sizeof(float));
  it->second.pop_front();
  return {};
}

Result<std::unique_ptr<CommRequest>> SelfCommunicator::IAllReduce(float*, int64_t) {
  return std::unique_ptr<CommRequest>(std::make_unique<DoneRequest>());
}

Result<std::unique_ptr<CommRequest>> SelfCommunicator::IReduceScatter(const float* send, float* recv,
                                                                      int64_t recv_count) {
  if (Status s = ReduceScatter(send, recv, recv_count); !s) return s.error();
  return std::unique_ptr<CommRequest>(std::make_unique<DoneRequest>());
}

Result<std::unique_ptr<Communicator>> SelfCommunicator::Split(const std::vector<int>& ranks) {
  if (ranks.size() != 1 || ranks[0] != 0) return Error{"split of a one-rank group must be {0}", ErrorKind::kInternal};
  return std::unique_ptr<Communicator>(std::make_unique<SelfCommunicator>());
}

std::unique_ptr<Communicator> LocalCommunicator() { return std::make_unique<SelfCommunicator>(); }

}  // namespace parallax::executor
