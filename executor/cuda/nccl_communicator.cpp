#include "executor/cuda/nccl_communicator.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"

namespace parallax::executor::gpu {
namespace {

Result<ncclDataType_t> NcclType(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kBf16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kF64: return ncclFloat64;
    case DType::kI32: return ncclInt32;
    case DType::kE4M3:
    case DType::kE5M2: break;  // FP8 tensors are not communicated (their scale would be lost)
  }
  return Error{"NCCL: unsupported dtype", ErrorKind::kInternal};
}

ncclConfig_t NonBlockingConfig() {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}

std::string Describe(const char* op, int64_t count, DType t, const Stream& s) {
  return std::string(op) + " of " + std::to_string(count) + " " + ToString(t) + " on the " + ToString(s.kind()) +
         " stream";
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> host, NcclComm comm,
                                   std::shared_ptr<CommWatchdog> watchdog, std::string label)
    : host_(std::move(host)), comm_(std::move(comm)), watchdog_(std::move(watchdog)), label_(std::move(label)) {
  watch_id_ = watchdog_->Register(&comm_, label_);
}

NcclCommunicator::~NcclCommunicator() {
  watchdog_->Unregister(watch_id_);
  if (comm_.get() == nullptr || comm_.aborted()) return;
  // Non-blocking communicators: flush (ncclCommFinalize) under the timeout, then destroy; a peer
  // that never finalises makes this an abort instead of a hang.
  const ncclResult_t r = ncclCommFinalize(comm_.get());
  if (r == ncclInProgress) {
    if (!WaitReady(comm_.get(), *watchdog_, "ncclCommFinalize", Others())) comm_.Abort();
  } else if (r != ncclSuccess) {
    comm_.Abort();
  }
}

std::string NcclCommunicator::Peer(int r) const { return "rank " + std::to_string(WorldRank(r)); }

std::string NcclCommunicator::Others() const {
  std::vector<int> others;
  for (int r = 0; r < size(); ++r) {
    if (r != rank()) others.push_back(WorldRank(r));
  }
  if (others.size() == 1) return "rank " + std::to_string(others.front());
  return "one of ranks " + RankList(others);
}

Status NcclCommunicator::WaitReady(ncclComm_t comm, CommWatchdog& wd, const std::string& what, const std::string& who) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int64_t spins = 0;; ++spins) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) return NcclError(q, "ncclCommGetAsyncError", __FILE__, __LINE__);
    if (state == ncclSuccess) return {};
    if (state != ncclInProgress) return NcclError(state, what.c_str(), __FILE__, __LINE__);
    if (spins > 64) sched_yield();
    if (spins > 4096) std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (std::chrono::duration<double>(Clock::now() - start).count() > wd.timeout_s()) {
      const int rank = LaunchRank();
      std::string msg = rank >= 0 ? "rank " + std::to_string(rank) + " on " : std::string();
      msg += HostName();
      msg += ": ";
      msg += what;
      msg += " got no answer from " + who + " within " + std::to_string(static_cast<int>(wd.timeout_s()));
      msg += " s: lost rank (" + who + " died or is stuck)";
      return Error{msg, ErrorKind::kInternal};
    }
  }
}

Status NcclCommunicator::Finish(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess) return {};
  if (r == ncclInProgress) {
    Status s = WaitReady(comm_.get(), *watchdog_, call, Others());
    if (!s) watchdog_->AbortAll(s.error());
    return s;
  }
  return NcclError(r, call, file, line);
}

#define PX_NCCL_FINISH(call)                                                      \
  do {                                                                            \
    if (Status px_f_ = Finish((call), #call, __FILE__, __LINE__); !px_f_) return px_f_; \
  } while (0)

Result<std::unique_ptr<Communicator>> NcclCommunicator::World(LaunchContext& launch, CudaBackend& backend,
                                                              double timeout_s) {
  auto host = launch.HostWorld(timeout_s);
  if (!host) return host.error();
  std::shared_ptr<CommWatchdog> wd = backend.watchdog();
  wd->set_timeout_s(timeout_s);
  PX_CUDA_TRY(cudaSetDevice(backend.device()));
  const int rank = (*host)->rank(), size = (*host)->size();
  // Rank 0's unique id reaches every rank over the host plane (MPI, or without MPI the TCP
  // rendezvous at MASTER_ADDR:MASTER_PORT): an all-gather of the ids, of which every rank keeps
  // rank 0's.
  ncclUniqueId id{};
  if (rank == 0) PX_NCCL_TRY(ncclGetUniqueId(&id));
  std::vector<char> all(static_cast<size_t>(size) * sizeof(id));
  if (Status s = (*host)->HostAllGather(&id, all.data(), sizeof(id)); !s) return s.error();
  std::memcpy(&id, all.data(), sizeof(id));
  ncclConfig_t cfg = NonBlockingConfig();
  ncclComm_t raw = nullptr;
  PX_NCCL_TRY(ncclCommInitRankConfig(&raw, size, id, rank, &cfg));
  NcclComm comm(raw);
  std::vector<int> others;
  for (int r = 0; r < size; ++r) {
    if (r != rank) others.push_back((*host)->WorldRank(r));
  }
  const std::string who = others.size() == 1 ? "rank " + std::to_string(others.front()) : "one of ranks " + RankList(others);
  if (Status s = WaitReady(comm.get(), *wd, "ncclCommInitRankConfig", who); !s) {
    comm.Abort();
    return s.error();
  }
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(host).value(), std::move(comm), std::move(wd), "world"));
}

Result<std::unique_ptr<Communicator>> NcclCommunicator::Split(const std::vector<int>& ranks) {
  if (watchdog_->aborted()) return watchdog_->abort_reason();
  int key = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == rank()) key = static_cast<int>(i);
  }
  if (key < 0) return Error{"Split: rank " + std::to_string(rank()) + " is not in its own group", ErrorKind::kInternal};
  const int color = *std::min_element(ranks.begin(), ranks.end());
  auto host = host_->Split(ranks);
  if (!host) return host.error();
  ncclConfig_t cfg = NonBlockingConfig();
  ncclComm_t raw = nullptr;
  const ncclResult_t r = ncclCommSplit(comm_.get(), color, key, &raw, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) return NcclError(r, "ncclCommSplit", __FILE__, __LINE__);
  NcclComm comm(raw);
  if (Status s = WaitReady(raw != nullptr ? raw : comm_.get(), *watchdog_, "ncclCommSplit", Others()); !s) {
    comm.Abort();
    return s.error();
  }
  if (raw == nullptr) return Error{"ncclCommSplit returned no communicator", ErrorKind::kInternal};
  int nranks = 0, me = -1;
  PX_NCCL_TRY(ncclCommCount(raw, &nranks));
  PX_NCCL_TRY(ncclCommUserRank(raw, &me));
  if (nranks != static_cast<int>(ranks.size()) || me != key) {
    return Error{"Split: the group lists of the members disagree (NCCL made a group of " + std::to_string(nranks) +
                     " with this rank at " + std::to_string(me) + ", expected " + std::to_string(ranks.size()) +
                     " and " + std::to_string(key) + ")",
                 ErrorKind::kInternal};
  }
  std::vector<int> world;
  world.reserve(ranks.size());
  for (int m : ranks) world.push_back(WorldRank(m));
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(host).value(), std::move(comm), watchdog_, "group " + RankList(world)));
}

template <class Call>
Status NcclCommunicator::Enqueue(Stream& stream, const std::string& what, const std::string& who, Call call) {
  if (watchdog_->aborted()) return watchdog_->abort_reason();
  auto* cs = dynamic_cast<CudaStream*>(&stream);
  if (cs == nullptr) {
    return Error{"the NCCL communicator runs on CUDA streams only (got a " + std::string(ToString(stream.kind())) +
                     " stream of another backend)",
                 ErrorKind::kInternal};
  }
  auto token = watchdog_->Begin(cs->get());
  if (!token) return token.error();
  if (Status s = call(cs->get()); !s) return s;
  return watchdog_->End(*token, cs->get(), what, who);
}

Status NcclCommunicator::AllReduce(DevPtr data, int64_t count, ReduceOp op, Stream& stream) {
  auto t = NcclType(data.dtype);
  if (!t) return t.error();
  const ncclRedOp_t rop = op == ReduceOp::kSum ? ncclSum : ncclMax;
  return Enqueue(stream, Describe("all-reduce", count, data.dtype, stream), Others(), [&](cudaStream_t s) -> Status {
    PX_NCCL_FINISH(ncclAllReduce(data.ptr, data.ptr, static_cast<size_t>(count), *t, rop, comm_.get(), s));
    return {};
  });
}

Status NcclCommunicator::ReduceScatter(DevPtr send, DevPtr recv, int64_t recv_count, Stream& stream) {
  auto t = NcclType(send.dtype);
  if (!t) return t.error();
  // In place when recv is this rank's block of send: NCCL's own convention.
  return Enqueue(stream, Describe("reduce-scatter", recv_count * size(), send.dtype, stream), Others(),
                 [&](cudaStream_t s) -> Status {
                   PX_NCCL_FINISH(ncclReduceScatter(send.ptr, recv.ptr, static_cast<size_t>(recv_count), *t, ncclSum,
                                                    comm_.get(), s));
                   return {};
                 });
}

Status NcclCommunicator::AllGather(DevPtr send, DevPtr recv, int64_t send_count, Stream& stream) {
  auto t = NcclType(send.dtype);
  if (!t) return t.error();
  return Enqueue(stream, Describe("all-gather", send_count * size(), send.dtype, stream), Others(),
                 [&](cudaStream_t s) -> Status {
                   PX_NCCL_FINISH(
                       ncclAllGather(send.ptr, recv.ptr, static_cast<size_t>(send_count), *t, comm_.get(), s));
                   return {};
                 });
}

Status NcclCommunicator::Broadcast(DevPtr data, int64_t count, int root, Stream& stream) {
  auto t = NcclType(data.dtype);
  if (!t) return t.error();
  return Enqueue(stream, Describe("broadcast", count, data.dtype, stream), root == rank() ? Others() : Peer(root),
                 [&](cudaStream_t s) -> Status {
                   PX_NCCL_FINISH(
                       ncclBroadcast(data.ptr, data.ptr, static_cast<size_t>(count), *t, root, comm_.get(), s));
                   return {};
                 });
}

Status NcclCommunicator::Send(DevPtr data, int64_t count, int peer, int /*tag*/, Stream& stream) {
  GroupStart();
  group_.push_back(P2p{true, data, count, peer, &stream});
  return GroupEnd();
}

Status NcclCommunicator::Recv(DevPtr data, int64_t count, int peer, int /*tag*/, Stream& stream) {
  GroupStart();
  group_.push_back(P2p{false, data, count, peer, &stream});
  return GroupEnd();
}

Status NcclCommunicator::GroupEnd() {
  if (group_depth_ == 0) return Error{"GroupEnd without GroupStart", ErrorKind::kInternal};
  if (--group_depth_ > 0 || group_.empty()) return {};
  std::vector<P2p> ops = std::move(group_);
  group_.clear();
  Stream* stream = ops.front().stream;
  for (const P2p& p : ops) {
    if (p.stream != stream) return Error{"a send/recv group spans two streams", ErrorKind::kInternal};
  }
  // A stuck exchange names the peer of its first receive (the data this rank waits for).
  int peer = ops.front().peer;
  for (const P2p& p : ops) {
    if (!p.send) {
      peer = p.peer;
      break;
    }
  }
  std::string what = ops.size() == 1 ? (ops.front().send ? "send" : "receive") : "send/receive group";
  what += " of " + std::to_string(ops.front().count) + " " + ToString(ops.front().data.dtype) + " on the " +
          ToString(stream->kind()) + " stream";
  return Enqueue(*stream, what, Peer(peer), [&](cudaStream_t s) -> Status {
    PX_NCCL_TRY(ncclGroupStart());
    for (const P2p& p : ops) {
      auto t = NcclType(p.data.dtype);
      if (!t) {
        (void)ncclGroupEnd();
        return t.error();
      }
      if (p.send) {
        PX_NCCL_TRY(ncclSend(p.data.ptr, static_cast<size_t>(p.count), *t, p.peer, comm_.get(), s));
      } else {
        PX_NCCL_TRY(ncclRecv(p.data.ptr, static_cast<size_t>(p.count), *t, p.peer, comm_.get(), s));
      }
    }
    PX_NCCL_FINISH(ncclGroupEnd());
    return {};
  });
}

void NcclCommunicator::Abort(int exit_code) {
  watchdog_->AbortAll(Error{"rank " + std::to_string(WorldRank(rank())) + " aborted the job", ErrorKind::kInternal});
  host_->Abort(exit_code);
}

}  // namespace parallax::executor::gpu
