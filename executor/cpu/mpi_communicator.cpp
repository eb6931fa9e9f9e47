#include "executor/cpu/mpi_communicator.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace parallax::executor {
namespace {

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

int WorldRankOfProcess() {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

MPI_Op OpOf(ReduceOp op) { return op == ReduceOp::kSum ? MPI_SUM : MPI_MAX; }

Status CheckCount(int64_t count) {
  if (count < 0 || count > INT_MAX) {
    return Error{"message of " + std::to_string(count) + " elements exceeds MPI's int count", ErrorKind::kInternal};
  }
  return {};
}

//! A non-blocking collective; `what` names it in watchdog messages.
class MpiRequest final : public CommRequest {
 public:
  MpiRequest(MpiCommunicator* comm, MPI_Request req, const char* what) : comm_(comm), req_(req), what_(what) {}
  ~MpiRequest() override {
    if (req_ != MPI_REQUEST_NULL) (void)comm_->Wait(&req_, what_, -1);
  }
  //! After completion, Wait() copies `count` floats from `from` to `to` (MPI_IN_PLACE
  //! reduce-scatter leaves the result at the start of the buffer, not at this rank's block).
  void MoveOnCompletion(const float* from, float* to, int64_t count) {
    move_from_ = from;
    move_to_ = to;
    move_count_ = count;
  }
  Status Wait() override {
    if (Status s = comm_->Wait(&req_, what_, -1); !s) return s;
    if (move_count_ > 0) std::memcpy(move_to_, move_from_, static_cast<size_t>(move_count_) * sizeof(float));
    move_count_ = 0;
    return {};
  }

 private:
  MpiCommunicator* comm_;
  MPI_Request req_;
  const char* what_;
  const float* move_from_ = nullptr;
  float* move_to_ = nullptr;
  int64_t move_count_ = 0;
};

}  // namespace

Error MpiError(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Error{"rank " + std::to_string(WorldRankOfProcess()) + " on " + HostName() + ": " + call + " failed (" +
                   std::string(text, static_cast<size_t>(len)) + ") at " + file + ":" + std::to_string(line),
               ErrorKind::kInternal};
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned, double timeout_s)
    : comm_(comm), owned_(owned), timeout_s_(timeout_s) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  // World ranks of the members, for messages that name a lost peer.
  MPI_Group group, world_group;
  MPI_Comm_group(comm_, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> local(static_cast<size_t>(size_));
  for (int i = 0; i < size_; ++i) local[static_cast<size_t>(i)] = i;
  world_ranks_.resize(static_cast<size_t>(size_));
  MPI_Group_translate_ranks(group, size_, local.data(), world_group, world_ranks_.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  (void)FlushSends();
  if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::World(double timeout_s) {
  PX_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(MPI_COMM_WORLD, false, timeout_s));
}

std::string MpiCommunicator::Members() const {
  // The other members: this process is alive, so a stuck collective waits on one of them.
  std::vector<int> others;
  for (size_t i = 0; i < world_ranks_.size(); ++i) {
    if (static_cast<int>(i) != rank_) others.push_back(world_ranks_[i]);
  }
  if (others.size() == 1) return "rank " + std::to_string(others.front());
  std::string s;
  for (int r : others) s += (s.empty() ? "" : ",") + std::to_string(r);
  return "one of ranks [" + s + "]";
}

Status MpiCommunicator::Wait(MPI_Request* req, const char* what, int peer) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int64_t spins = 0;; ++spins) {
    int done = 0;
    PX_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return {};
    // Spin briefly for latency, then yield: ranks may share cores (mpirun --oversubscribe).
    if (spins > 200) sched_yield();
    if (spins > 20000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if ((spins & 255) == 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() > timeout_s_) {
      const std::string who = peer >= 0 ? "rank " + std::to_string(WorldRank(peer))
                                        : Members();
      return Error{"rank " + std::to_string(WorldRankOfProcess()) + " on " + HostName() + ": " + what +
                       " got no answer from " + who + " within " + std::to_string(static_cast<int>(timeout_s_)) +
                       " s: lost rank (" + who + " died or is stuck)",
                   ErrorKind::kInternal};
    }
  }
}

Status MpiCommunicator::AllReduce(float* data, int64_t count, ReduceOp op) {
  if (Status s = CheckCount(count); !s) return s;
  MPI_Request req;
  PX_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, OpOf(op), comm_, &req));
  return Wait(&req, "all-reduce", -1);
}

Status MpiCommunicator::AllReduce(double* data, int64_t count, ReduceOp op) {
  if (Status s = CheckCount(count); !s) return s;
  MPI_Request req;
  PX_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_DOUBLE, OpOf(op), comm_, &req));
  return Wait(&req, "all-reduce", -1);
}

Status MpiCommunicator::ReduceScatter(const float* send, float* recv, int64_t recv_count) {
  if (Status s = CheckCount(recv_count * size_); !s) return s;
  MPI_Request req;
  PX_MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, static_cast<int>(recv_count), MPI_FLOAT, MPI_SUM, comm_, &req));
  return Wait(&req, "reduce-scatter", -1);
}

Status MpiCommunicator::AllGather(const float* send, float* recv, int64_t send_count) {
  if (Status s = CheckCount(send_count * size_); !s) return s;
  MPI_Request req;
  const bool in_place = send == recv + static_cast<int64_t>(rank_) * send_count;
  PX_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, static_cast<int>(send_count), MPI_FLOAT, recv,
                              static_cast<int>(send_count), MPI_FLOAT, comm_, &req));
  return Wait(&req, "all-gather", -1);
}

Status MpiCommunicator::Broadcast(float* data, int64_t count, int root) {
  if (Status s = CheckCount(count); !s) return s;
  MPI_Request req;
  PX_MPI_CHECK(MPI_Ibcast(data, static_cast<int>(count), MPI_FLOAT, root, comm_, &req));
  return Wait(&req, "broadcast", root == rank_ ? -1 : root);
}

Status MpiCommunicator::Reap() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    PX_MPI_CHECK(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE));
    it = done ? sends_.erase(it) : std::next(it);
  }
  return {};
}

Status MpiCommunicator::Send(const float* data, int64_t count, int peer, int tag) {
  if (Status s = CheckCount(count); !s) return s;
  if (Status s = Reap(); !s) return s;
  PendingSend& p = sends_.emplace_back();
  p.data.assign(data, data + count);
  p.peer = peer;
  PX_MPI_CHECK(MPI_Isend(p.data.data(), static_cast<int>(count), MPI_FLOAT, peer, tag, comm_, &p.request));
  return {};
}

Status MpiCommunicator::Recv(float* data, int64_t count, int peer, int tag) {
  if (Status s = CheckCount(count); !s) return s;
  MPI_Request req;
  PX_MPI_CHECK(MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_, &req));
  return Wait(&req, "receive", peer);
}

Status MpiCommunicator::FlushSends() {
  while (!sends_.empty()) {
    PendingSend& p = sends_.front();
    if (Status s = Wait(&p.request, "send", p.peer); !s) return s;
    sends_.pop_front();
  }
  return {};
}

Status MpiCommunicator::Barrier() {
  MPI_Request req;
  PX_MPI_CHECK(MPI_Ibarrier(comm_, &req));
  return Wait(&req, "barrier", -1);
}

Result<std::unique_ptr<CommRequest>> MpiCommunicator::IAllReduce(float* data, int64_t count) {
  if (Status s = CheckCount(count); !s) return s.error();
  MPI_Request req;
  PX_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_, &req));
  return std::unique_ptr<CommRequest>(std::make_unique<MpiRequest>(this, req, "all-reduce"));
}

Result<std::unique_ptr<CommRequest>> MpiCommunicator::IReduceScatter(const float* send, float* recv,
                                                                     int64_t recv_count) {
  if (Status s = CheckCount(recv_count * size_); !s) return s.error();
  MPI_Request req;
  const int64_t offset = static_cast<int64_t>(rank_) * recv_count;
  if (recv != send + offset) {
    PX_MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, static_cast<int>(recv_count), MPI_FLOAT, MPI_SUM, comm_,
                                           &req));
    return std::unique_ptr<CommRequest>(std::make_unique<MpiRequest>(this, req, "reduce-scatter"));
  }
  // In place: MPI reads the whole buffer and writes this rank's sum to its first block.
  float* whole = recv - offset;
  PX_MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, whole, static_cast<int>(recv_count), MPI_FLOAT, MPI_SUM,
                                         comm_, &req));
  auto r = std::make_unique<MpiRequest>(this, req, "reduce-scatter");
  if (offset != 0) r->MoveOnCompletion(whole, recv, recv_count);
  return std::unique_ptr<CommRequest>(std::move(r));
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::Split(const std::vector<int>& ranks) {
  int key = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == rank_) key = static_cast<int>(i);
  }
  if (key < 0) return Error{"Split: rank " + std::to_string(rank_) + " is not in its own group", ErrorKind::kInternal};
  int color = INT_MAX;
  for (int r : ranks) color = std::min(color, r);
  MPI_Comm out = MPI_COMM_NULL;
  PX_MPI_CHECK(MPI_Comm_split(comm_, color, key, &out));
  auto c = std::unique_ptr<MpiCommunicator>(new MpiCommunicator(out, true, timeout_s_));
  if (c->size() != static_cast<int>(ranks.size())) {
    return Error{"Split: group lists of the members disagree", ErrorKind::kInternal};
  }
  return std::unique_ptr<Communicator>(std::move(c));
}

void MpiCommunicator::Abort(int exit_code) { MPI_Abort(MPI_COMM_WORLD, exit_code); }

}  // namespace parallax::executor
