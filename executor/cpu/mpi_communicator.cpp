#include "executor/cpu/mpi_communicator.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <thread>

#include "executor/cpu/cpu_streams.h"
#include "executor/cpu/mpi_mailbox.h"
#include "executor/cpu/wait_policy.h"

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

Status CheckCount(int64_t count) {
  if (count < 0 || count > INT_MAX) {
    return Error{"message of " + std::to_string(count) + " elements exceeds MPI's int count", ErrorKind::kInternal};
  }
  return {};
}

// bf16 / fp16 reductions: MPI has no 16-bit float types, so they travel as uint16 with user ops
// that widen to fp32, combine and round back (round to nearest even), as NCCL's bf16 sum does.
template <float (*Load)(uint16_t), uint16_t (*Store)(float), bool kMax>
void HalfOp(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = Load(a[i]), y = Load(b[i]);
    b[i] = Store(kMax ? std::max(x, y) : x + y);
  }
}

struct HalfOps {
  MPI_Op bf16_sum = MPI_OP_NULL, bf16_max = MPI_OP_NULL, f16_sum = MPI_OP_NULL, f16_max = MPI_OP_NULL;
  HalfOps() {
    MPI_Op_create(&HalfOp<Bf16ToFloat, FloatToBf16, false>, 1, &bf16_sum);
    MPI_Op_create(&HalfOp<Bf16ToFloat, FloatToBf16, true>, 1, &bf16_max);
    MPI_Op_create(&HalfOp<F16ToFloat, FloatToF16, false>, 1, &f16_sum);
    MPI_Op_create(&HalfOp<F16ToFloat, FloatToF16, true>, 1, &f16_max);
  }
};

const HalfOps& Halves() {
  static const HalfOps ops;  // created after MPI_Init, on first use; freed by MPI_Finalize
  return ops;
}

Result<MPI_Datatype> TypeOf(DType t) {
  switch (t) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kBf16:
    case DType::kF16: return MPI_UINT16_T;
    case DType::kI32: return MPI_INT32_T;
    case DType::kE4M3:
    case DType::kE5M2: break;  // FP8 tensors are not communicated (their scale would be lost)
  }
  return Error{std::string("unsupported dtype ") + ToString(t), ErrorKind::kInternal};
}

MPI_Op OpOf(DType t, ReduceOp op) {
  const bool sum = op == ReduceOp::kSum;
  if (t == DType::kBf16) return sum ? Halves().bf16_sum : Halves().bf16_max;
  if (t == DType::kF16) return sum ? Halves().f16_sum : Halves().f16_max;
  return sum ? MPI_SUM : MPI_MAX;
}

}  // namespace

//! A device-plane operation: posts its MPI requests when the stream reaches it.
class MpiStreamOp final : public CpuStreamOp {
 public:
  using Post = std::function<Status(std::vector<MPI_Request>&)>;
  MpiStreamOp(MpiCommunicator* comm, const char* what, int peer, Post post)
      : comm_(comm), what_(what), peer_(peer), post_(std::move(post)) {}
  //! Runs after completion (e.g. moves an in-place reduce-scatter's block into place).
  void Then(std::function<void()> f) { then_ = std::move(f); }

  Status Start() override { return post_(reqs_); }
  Result<bool> Test() override {
    comm_->ServeLiveness();
    if (reqs_.empty()) return true;
    int done = 0;
    PX_MPI_CHECK(MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &done, MPI_STATUSES_IGNORE));
    if (done && then_) then_();
    return done != 0;
  }
  double timeout_s() const override { return comm_->timeout_s(); }
  Error TimedOut() override { return comm_->Lost(what_, peer_); }

 private:
  MpiCommunicator* comm_;
  const char* what_;
  int peer_;
  Post post_;
  std::vector<MPI_Request> reqs_;
  std::function<void()> then_;
};

Error MpiError(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Error{"rank " + std::to_string(WorldRankOfProcess()) + " on " + HostName() + ": " + call + " failed (" +
                   std::string(text, static_cast<size_t>(len)) + ") at " + file + ":" + std::to_string(line),
               ErrorKind::kInternal};
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, MPI_Comm host_comm, double timeout_s,
                                 std::shared_ptr<Liveness> liveness)
    : comm_(comm), host_comm_(host_comm), timeout_s_(timeout_s), liveness_(std::move(liveness)) {
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
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (host_comm_ != MPI_COMM_NULL) MPI_Comm_free(&host_comm_);
}

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::World(double timeout_s) {
  PX_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_Comm device = MPI_COMM_NULL, host = MPI_COMM_NULL;
  PX_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &device));
  PX_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &host));
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(device, host, timeout_s, std::make_shared<Liveness>()));
}

std::string MpiCommunicator::Members() {
  // The other members: this process is alive, so a stuck collective waits on one of them.
  std::vector<int> others;
  for (size_t i = 0; i < world_ranks_.size(); ++i) {
    if (static_cast<int>(i) != rank_) others.push_back(world_ranks_[i]);
  }
  if (others.size() == 1) return "rank " + std::to_string(others.front());
  // Ask them: a dead or stopped rank stays silent; one waiting elsewhere answers.
  const std::vector<int> silent = liveness_->Unresponsive(others, std::min(5.0, std::max(1.0, timeout_s_ / 2)));
  const std::vector<int>& named = silent.empty() ? others : silent;
  std::string s = silent.size() == 1 ? "rank " : silent.empty() ? "one of ranks [" : "ranks [";
  for (size_t i = 0; i < named.size(); ++i) {
    if (i > 0) s.push_back(',');
    s.append(std::to_string(named[i]));
  }
  if (silent.size() != 1) s.push_back(']');
  return s;
}

Error MpiCommunicator::Lost(const char* what, int peer) {
  const std::string who = peer >= 0 ? "rank " + std::to_string(WorldRank(peer)) : Members();
  return Error{"rank " + std::to_string(WorldRankOfProcess()) + " on " + HostName() + ": " + what +
                   " got no answer from " + who + " within " + std::to_string(static_cast<int>(timeout_s_)) +
                   " s: lost rank (" + who + " died or is stuck)",
               ErrorKind::kInternal};
}

Status MpiCommunicator::Wait(MPI_Request* req, const char* what, int peer) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (Backoff backoff;; backoff.Pause()) {
    int done = 0;
    PX_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return {};
    const int64_t polls = backoff.polls();
    if ((polls & 15) == 0) liveness_->Serve();
    if ((polls & 63) == 0 && std::chrono::duration<double>(Clock::now() - start).count() > timeout_s_) {
      return Lost(what, peer);
    }
  }
}

// ---- host plane ------------------------------------------------------------------------------
// The MPI checker does not see that Wait() completes each request (MPI_Test until done), nor that
// a failed MPI call leaves no request to wait for.
// NOLINTBEGIN(clang-analyzer-optin.mpi.MPI-Checker)

Status MpiCommunicator::HostAllReduce(double* data, int64_t count, ReduceOp op) {
  if (Status s = CheckCount(count); !s) return s;
  MPI_Request req;
  PX_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_DOUBLE,
                              op == ReduceOp::kSum ? MPI_SUM : MPI_MAX, host_comm_, &req));
  return Wait(&req, "all-reduce", -1);
}

Status MpiCommunicator::HostAllGather(const void* send, void* recv, int64_t bytes) {
  if (Status s = CheckCount(bytes * size_); !s) return s;
  MPI_Request req;
  PX_MPI_CHECK(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                              host_comm_, &req));
  return Wait(&req, "all-gather", -1);
}

Status MpiCommunicator::Barrier() {
  MPI_Request req;
  PX_MPI_CHECK(MPI_Ibarrier(host_comm_, &req));
  return Wait(&req, "barrier", -1);
}

// NOLINTEND(clang-analyzer-optin.mpi.MPI-Checker)

// ---- device plane ----------------------------------------------------------------------------

Status MpiCommunicator::EnqueueOp(Stream& stream, std::unique_ptr<MpiStreamOp> op) {
  auto* cs = dynamic_cast<CpuStream*>(&stream);
  if (cs == nullptr) {
    return Error{"the MPI communicator runs on CPU streams only (got a " + std::string(ToString(stream.kind())) +
                     " stream of another backend)",
                 ErrorKind::kInternal};
  }
  return cs->owner()->Enqueue(stream, std::move(op));
}

Status MpiCommunicator::AllReduce(DevPtr data, int64_t count, ReduceOp op, Stream& stream) {
  if (Status s = CheckCount(count); !s) return s;
  auto type = TypeOf(data.dtype);
  if (!type) return type.error();
  const MPI_Op mop = OpOf(data.dtype, op);
  const MPI_Datatype t = *type;
  return EnqueueOp(stream, std::make_unique<MpiStreamOp>(this, "all-reduce", -1, [=, this](auto& reqs) -> Status {
    reqs.emplace_back();
    PX_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.ptr, static_cast<int>(count), t, mop, comm_, &reqs.back()));
    return {};
  }));
}

Status MpiCommunicator::ReduceScatter(DevPtr send, DevPtr recv, int64_t recv_count, Stream& stream) {
  if (Status s = CheckCount(recv_count * size_); !s) return s;
  auto type = TypeOf(send.dtype);
  if (!type) return type.error();
  const MPI_Op mop = OpOf(send.dtype, ReduceOp::kSum);
  const MPI_Datatype t = *type;
  const DevPtr mine = send + static_cast<int64_t>(rank_) * recv_count;
  const bool in_place = recv == mine;
  auto op = std::make_unique<MpiStreamOp>(this, "reduce-scatter", -1, [=, this](auto& reqs) -> Status {
    reqs.emplace_back();
    // In place, MPI reads the whole buffer and writes this rank's sum to its first block.
    PX_MPI_CHECK(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : send.ptr, in_place ? send.ptr : recv.ptr,
                                           static_cast<int>(recv_count), t, mop, comm_, &reqs.back()));
    return {};
  });
  if (in_place && rank_ != 0) {
    op->Then([=] { std::memmove(recv.ptr, send.ptr, static_cast<size_t>(recv_count * SizeOf(send.dtype))); });
  }
  return EnqueueOp(stream, std::move(op));
}

Status MpiCommunicator::AllGather(DevPtr send, DevPtr recv, int64_t send_count, Stream& stream) {
  if (Status s = CheckCount(send_count * size_); !s) return s;
  auto type = TypeOf(send.dtype);
  if (!type) return type.error();
  const MPI_Datatype t = *type;
  const bool in_place = send == recv + static_cast<int64_t>(rank_) * send_count;
  return EnqueueOp(stream, std::make_unique<MpiStreamOp>(this, "all-gather", -1, [=, this](auto& reqs) -> Status {
    reqs.emplace_back();
    PX_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.ptr, static_cast<int>(send_count), t, recv.ptr,
                                static_cast<int>(send_count), t, comm_, &reqs.back()));
    return {};
  }));
}

Status MpiCommunicator::Broadcast(DevPtr data, int64_t count, int root, Stream& stream) {
  if (Status s = CheckCount(count); !s) return s;
  auto type = TypeOf(data.dtype);
  if (!type) return type.error();
  const MPI_Datatype t = *type;
  return EnqueueOp(stream, std::make_unique<MpiStreamOp>(this, "broadcast", root == rank_ ? -1 : root,
                                                         [=, this](auto& reqs) -> Status {
                                                           reqs.emplace_back();
                                                           PX_MPI_CHECK(MPI_Ibcast(data.ptr, static_cast<int>(count),
                                                                                   t, root, comm_, &reqs.back()));
                                                           return {};
                                                         }));
}

void MpiCommunicator::GroupStart() { ++group_depth_; }

Status MpiCommunicator::GroupEnd() {
  if (group_depth_ == 0) return Error{"GroupEnd without GroupStart", ErrorKind::kInternal};
  if (--group_depth_ > 0 || group_.empty()) return {};
  std::vector<P2p> ops = std::move(group_);
  group_.clear();
  Stream* stream = ops.front().stream;
  for (const P2p& p : ops) {
    if (p.stream != stream) return Error{"a send/recv group spans two streams", ErrorKind::kInternal};
    if (Status s = CheckCount(p.count); !s) return s;
  }
  // A stuck exchange names the peer of its first receive (the data this rank waits for).
  int peer = ops.front().peer;
  for (const P2p& p : ops) {
    if (!p.send) {
      peer = p.peer;
      break;
    }
  }
  const char* what = ops.size() == 1 ? (ops.front().send ? "send" : "receive") : "send/receive group";
  return EnqueueOp(*stream, std::make_unique<MpiStreamOp>(this, what, peer, [ops, this](auto& reqs) -> Status {
    for (const P2p& p : ops) {
      auto type = TypeOf(p.data.dtype);
      if (!type) return type.error();
      reqs.emplace_back();
      if (p.send) {
        PX_MPI_CHECK(MPI_Isend(p.data.ptr, static_cast<int>(p.count), *type, p.peer, p.tag, comm_, &reqs.back()));
      } else {
        PX_MPI_CHECK(MPI_Irecv(p.data.ptr, static_cast<int>(p.count), *type, p.peer, p.tag, comm_, &reqs.back()));
      }
    }
    return {};
  }));
}

Status MpiCommunicator::Send(DevPtr data, int64_t count, int peer, int tag, Stream& stream) {
  GroupStart();
  group_.push_back(P2p{true, data, count, peer, tag, &stream});
  return GroupEnd();
}

Status MpiCommunicator::Recv(DevPtr data, int64_t count, int peer, int tag, Stream& stream) {
  GroupStart();
  group_.push_back(P2p{false, data, count, peer, tag, &stream});
  return GroupEnd();
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::Split(const std::vector<int>& ranks) {
  int key = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == rank_) key = static_cast<int>(i);
  }
  if (key < 0) return Error{"Split: rank " + std::to_string(rank_) + " is not in its own group", ErrorKind::kInternal};
  int color = INT_MAX;
  for (int r : ranks) color = std::min(color, r);
  MPI_Comm device = MPI_COMM_NULL, host = MPI_COMM_NULL;
  PX_MPI_CHECK(MPI_Comm_split(host_comm_, color, key, &device));
  PX_MPI_CHECK(MPI_Comm_dup(device, &host));
  auto c = std::unique_ptr<MpiCommunicator>(new MpiCommunicator(device, host, timeout_s_, liveness_));
  if (c->size() != static_cast<int>(ranks.size())) {
    return Error{"Split: group lists of the members disagree", ErrorKind::kInternal};
  }
  return std::unique_ptr<Communicator>(std::move(c));
}

void MpiCommunicator::Abort(int exit_code) { MPI_Abort(MPI_COMM_WORLD, exit_code); }

Result<std::unique_ptr<Mailbox>> MpiCommunicator::OpenMailbox() { return MpiMailbox::Open(this, host_comm_); }

}  // namespace parallax::executor
