#include "executor/cpu/mpi_mailbox.h"

#include <chrono>
#include <cstdint>
#include <string>

#include "executor/cpu/wait_policy.h"

namespace parallax::executor {

// The MPI checker does not see that Reap()/Flush() complete the requests held in outgoing_.
// NOLINTBEGIN(clang-analyzer-optin.mpi.MPI-Checker)

MpiMailbox::MpiMailbox(MpiCommunicator* owner, MPI_Comm comm) : owner_(owner), comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Result<std::unique_ptr<Mailbox>> MpiMailbox::Open(MpiCommunicator* owner, MPI_Comm comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  PX_MPI_CHECK(MPI_Comm_dup(comm, &dup));
  return std::unique_ptr<Mailbox>(new MpiMailbox(owner, dup));
}

MpiMailbox::~MpiMailbox() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  (void)Flush();
  MPI_Comm_free(&comm_);
}

Status MpiMailbox::Post(int peer, int tag, const void* data, int64_t bytes) {
  if (bytes < 0 || bytes > INT32_MAX) return Error{"mailbox message too large", ErrorKind::kInternal};
  std::unique_ptr<Outgoing> out;
  if (spare_.empty()) {
    out = std::make_unique<Outgoing>();
  } else {
    out = std::move(spare_.back());
    spare_.pop_back();
  }
  const auto* first = static_cast<const char*>(data);
  out->bytes.assign(first, first + bytes);  // no zero fill; reuses a kept buffer's capacity
  PX_MPI_CHECK(MPI_Isend(out->bytes.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &out->request));
  outgoing_.push_back(std::move(out));
  return Reap();
}

Status MpiMailbox::Reap() {
  for (size_t i = 0; i < outgoing_.size();) {
    int done = 0;
    PX_MPI_CHECK(MPI_Test(&outgoing_[i]->request, &done, MPI_STATUS_IGNORE));
    if (done) {
      Keep(std::move(outgoing_[i]));
      outgoing_[i] = std::move(outgoing_.back());
      outgoing_.pop_back();
    } else {
      ++i;
    }
  }
  return {};
}

Result<bool> MpiMailbox::Poll(int peer, int tag, int* source, int64_t* bytes) {
  PX_TRY(Reap());
  owner_->ServeLiveness();
  int flag = 0;
  MPI_Status st;
  PX_MPI_CHECK(MPI_Iprobe(peer == kAnySource ? MPI_ANY_SOURCE : peer, tag, comm_, &flag, &st));
  if (flag && source != nullptr) *source = st.MPI_SOURCE;
  if (flag && bytes != nullptr) {
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    *bytes = count;
  }
  return flag != 0;
}

Result<int> MpiMailbox::Receive(int peer, int tag, void* data, int64_t bytes) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int source = -1;
  for (Backoff backoff;; backoff.Pause()) {
    PX_ASSIGN(const bool ready, Poll(peer, tag, &source, nullptr));
    if (ready) break;
    if ((backoff.polls() & 63) == 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() > owner_->timeout_s()) {
      return owner_->Lost("mailbox receive", peer == kAnySource ? -1 : peer);
    }
  }
  MPI_Status st;
  PX_MPI_CHECK(MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, source, tag, comm_, &st));
  int got = 0;
  MPI_Get_count(&st, MPI_BYTE, &got);
  if (got != bytes) {
    return Error{"mailbox: message of " + std::to_string(got) + " bytes where " + std::to_string(bytes) +
                     " were expected (tag " + std::to_string(tag) + ")",
                 ErrorKind::kInternal};
  }
  return source;
}

Status MpiMailbox::Flush() {
  for (auto& out : outgoing_) PX_TRY(owner_->Wait(&out->request, "mailbox send", -1));
  for (auto& out : outgoing_) Keep(std::move(out));
  outgoing_.clear();
  return {};
}

void MpiMailbox::Keep(std::unique_ptr<Outgoing> out) {
  if (spare_.size() < kSpareSends) spare_.push_back(std::move(out));
}

// NOLINTEND(clang-analyzer-optin.mpi.MPI-Checker)

}  // namespace parallax::executor
