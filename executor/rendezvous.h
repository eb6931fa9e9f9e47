#pragma once
// A small TCP rendezvous for jobs started without MPI (torchrun, Slurm, Kubernetes): rank 0
// listens on the master port, every other rank connects to MASTER_ADDR:MASTER_PORT, and rank 0
// hands a blob (the NCCL unique id) to all; it also serves as a barrier. Star topology over POSIX
// sockets: Debian packages no small, well-kept library for this (docs/executor.md). Frames are
// length-prefixed; every blocking call gives up at the timeout with an error naming the address,
// the port and the rank waited for.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::executor {

//! An owned socket descriptor (closed on destruction).
class SocketFd {
 public:
  SocketFd() = default;
  explicit SocketFd(int fd) : fd_(fd) {}
  ~SocketFd();
  SocketFd(SocketFd&& o) noexcept : fd_(o.release()) {}
  SocketFd& operator=(SocketFd&& o) noexcept;
  SocketFd(const SocketFd&) = delete;
  SocketFd& operator=(const SocketFd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_ = -1;
};

class Rendezvous {
 public:
  //! Collective over the job: rank 0 binds `port` (every interface) and waits for the others;
  //! the others connect to `addr`:`port`, retrying with backoff. Every rank checks that all agree
  //! on `world_size`; a disagreement, a duplicate or out-of-range rank, or a rank missing at
  //! `timeout_s` is an error on every rank that can be told.
  static Result<std::unique_ptr<Rendezvous>> Join(const std::string& addr, int port, int rank, int world_size,
                                                  double timeout_s);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  //! Rank 0's `blob` to every rank (other ranks' argument is ignored); returns it on all.
  Result<std::vector<uint8_t>> Broadcast(const std::vector<uint8_t>& blob);
  //! recv = concat over ranks of each rank's `bytes` bytes (every rank passes the same `bytes`).
  Status AllGather(const void* send, void* recv, size_t bytes);
  //! Returns when every rank has entered it.
  Status Barrier();
  //! Collective over this rendezvous, as Communicator::Split: every rank passes the ranks of its
  //! group (in the new order; the groups partition the ranks). The group's first member listens on
  //! a fresh port of its host, found through an all-gather here; the others connect to it.
  Result<std::unique_ptr<Rendezvous>> Split(const std::vector<int>& ranks);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  Rendezvous(std::string addr, int port, int rank, int world_size, double timeout_s);
  std::string Where() const;
  //! Rank 0 accepts every other rank on `listener`; the others connect to addr_:port_.
  Status Connect(const SocketFd& listener);
  Status Gather(const void* send, void* recv, size_t bytes, const char* what);

  std::string addr_;
  int port_ = 0;
  int rank_ = 0;
  int world_size_ = 1;
  double timeout_s_ = 0;
  std::string label_;
  //! Every rank's address as rank 0 saw it (rank 0's: the address the others reached it at).
  std::vector<std::string> hosts_;
  //! Rank 0: one socket per rank (index = rank; its own empty). Others: [0] = rank 0.
  std::vector<SocketFd> peers_;
};

}  // namespace parallax::executor
