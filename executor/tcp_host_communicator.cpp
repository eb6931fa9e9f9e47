#include "executor/tcp_host_communicator.h"

#include <algorithm>
#include <cstdlib>

namespace parallax::executor {

TcpHostCommunicator::TcpHostCommunicator(std::unique_ptr<Rendezvous> rendezvous, std::vector<int> world_ranks)
    : rv_(std::move(rendezvous)), world_ranks_(std::move(world_ranks)) {}

Status TcpHostCommunicator::HostAllReduce(double* data, int64_t count, ReduceOp op) {
  const auto n = static_cast<size_t>(count);
  std::vector<double> all(n * static_cast<size_t>(size()));
  if (Status s = rv_->AllGather(data, all.data(), n * sizeof(double)); !s) return s;
  for (size_t i = 0; i < n; ++i) {
    double acc = all[i];
    for (int r = 1; r < size(); ++r) {
      const double v = all[static_cast<size_t>(r) * n + i];
      acc = op == ReduceOp::kSum ? acc + v : std::max(acc, v);
    }
    data[i] = acc;
  }
  return {};
}

Status TcpHostCommunicator::HostAllGather(const void* send, void* recv, int64_t bytes) {
  return rv_->AllGather(send, recv, static_cast<size_t>(bytes));
}

Result<std::unique_ptr<Communicator>> TcpHostCommunicator::Split(const std::vector<int>& ranks) {
  auto g = rv_->Split(ranks);
  if (!g) return g.error();
  std::vector<int> world;
  world.reserve(ranks.size());
  for (int r : ranks) world.push_back(WorldRank(r));
  return std::unique_ptr<Communicator>(new TcpHostCommunicator(std::move(g).value(), std::move(world)));
}

void TcpHostCommunicator::Abort(int exit_code) { std::_Exit(exit_code); }

Status TcpHostCommunicator::NoDevicePlane() {
  return Error{"the TCP host communicator carries host data only; tensors go through the backend's own "
               "communicator (NCCL)",
               ErrorKind::kInternal};
}

}  // namespace parallax::executor
