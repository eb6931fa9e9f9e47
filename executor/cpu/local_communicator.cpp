#include "executor/cpu/local_communicator.h"

#include <cstring>
#include <functional>

#include "executor/cpu/cpu_streams.h"
#include "executor/launch.h"

namespace parallax::executor {
namespace {

//! A stream operation done entirely when it starts.
class CopyOp final : public CpuStreamOp {
 public:
  explicit CopyOp(std::function<Status()> run) : run_(std::move(run)) {}
  Status Start() override { return run_(); }
  Result<bool> Test() override { return true; }
  double timeout_s() const override { return 1e9; }
  Error TimedOut() override { return Error{"local copy timed out", ErrorKind::kInternal}; }

 private:
  std::function<Status()> run_;
};

Status Enqueue(Stream& stream, std::function<Status()> run) {
  auto* cs = dynamic_cast<CpuStream*>(&stream);
  if (cs == nullptr) return Error{"the local communicator runs on CPU streams only", ErrorKind::kInternal};
  return cs->owner()->Enqueue(stream, std::make_unique<CopyOp>(std::move(run)));
}

Status Move(DevPtr dst, DevPtr src, int64_t count) {
  if (dst.ptr != src.ptr) std::memmove(dst.ptr, src.ptr, static_cast<size_t>(count * SizeOf(src.dtype)));
  return {};
}

}  // namespace

Status SelfCommunicator::HostAllGather(const void* send, void* recv, int64_t bytes) {
  if (send != recv) std::memmove(recv, send, static_cast<size_t>(bytes));
  return {};
}

Status SelfCommunicator::AllReduce(DevPtr, int64_t, ReduceOp, Stream& stream) {
  return Enqueue(stream, [] { return Status(); });
}

Status SelfCommunicator::ReduceScatter(DevPtr send, DevPtr recv, int64_t recv_count, Stream& stream) {
  return Enqueue(stream, [=] { return Move(recv, send, recv_count); });
}

Status SelfCommunicator::AllGather(DevPtr send, DevPtr recv, int64_t send_count, Stream& stream) {
  return Enqueue(stream, [=] { return Move(recv, send, send_count); });
}

Status SelfCommunicator::Broadcast(DevPtr, int64_t, int, Stream& stream) {
  return Enqueue(stream, [] { return Status(); });
}

Status SelfCommunicator::Send(DevPtr data, int64_t count, int peer, int tag, Stream& stream) {
  if (peer != 0) return Error{"send to rank " + std::to_string(peer) + " in a group of one", ErrorKind::kInternal};
  return Enqueue(stream, [=, this] {
    const auto* p = static_cast<const char*>(data.ptr);
    queued_[tag].emplace_back(p, p + count * SizeOf(data.dtype));
    return Status();
  });
}

Status SelfCommunicator::Recv(DevPtr data, int64_t count, int peer, int tag, Stream& stream) {
  return Enqueue(stream, [=, this]() -> Status {
    auto it = queued_.find(tag);
    if (peer != 0 || it == queued_.end() || it->second.empty()) {
      return Error{"receive with tag " + std::to_string(tag) + " has no matching send (it would never complete)",
                   ErrorKind::kInternal};
    }
    std::vector<char>& msg = it->second.front();
    if (static_cast<int64_t>(msg.size()) != count * SizeOf(data.dtype)) {
      return Error{"receive of " + std::to_string(count) + " elements matched a send of another size",
                   ErrorKind::kInternal};
    }
    std::memcpy(data.ptr, msg.data(), msg.size());
    it->second.pop_front();
    return Status();
  });
}

Result<std::unique_ptr<Communicator>> SelfCommunicator::Split(const std::vector<int>& ranks) {
  if (ranks.size() != 1 || ranks[0] != 0) return Error{"split of a one-rank group must be {0}", ErrorKind::kInternal};
  return std::unique_ptr<Communicator>(std::make_unique<SelfCommunicator>());
}

std::unique_ptr<Communicator> LocalCommunicator() { return std::make_unique<SelfCommunicator>(); }

}  // namespace parallax::executor
