#pragma once
// Mailbox over MPI: its own duplicate of the communicator's group (so its messages never match the
// collectives'), non-blocking sends of owned copies, probes, and receives under the watchdog.

#include <mpi.h>

#include <memory>
#include <vector>

#include "executor/cpu/mpi_communicator.h"
#include "executor/mailbox.h"

namespace parallax::executor {

class MpiMailbox final : public Mailbox {
 public:
  //! Collective over `comm`'s members (MPI_Comm_dup).
  static Result<std::unique_ptr<Mailbox>> Open(MpiCommunicator* owner, MPI_Comm comm);
  ~MpiMailbox() override;
  MpiMailbox(const MpiMailbox&) = delete;
  MpiMailbox& operator=(const MpiMailbox&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Post(int peer, int tag, const void* data, int64_t bytes) override;
  Result<bool> Poll(int peer, int tag, int* source, int64_t* bytes) override;
  Result<int> Receive(int peer, int tag, void* data, int64_t bytes) override;
  Status Flush() override;

 private:
  MpiMailbox(MpiCommunicator* owner, MPI_Comm comm);
  //! Frees the sends that completed.
  Status Reap();
  struct Outgoing {
    std::vector<char> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  //! A delivered send's buffer kept for the next Post (at most kSpareSends): a classic mode posts
  //! a model's gradient or weights every step, and a fresh buffer of that size is fresh pages.
  void Keep(std::unique_ptr<Outgoing> out);
  static constexpr size_t kSpareSends = 8;
  MpiCommunicator* owner_;
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<std::unique_ptr<Outgoing>> outgoing_;
  std::vector<std::unique_ptr<Outgoing>> spare_;
};

}  // namespace parallax::executor
