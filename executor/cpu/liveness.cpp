#include "executor/cpu/liveness.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace parallax::executor {
namespace {
constexpr int kPing = 1;
constexpr int kPong = 2;
}  // namespace

Liveness::Liveness() {
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &self_);
}

Liveness::~Liveness() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Request& r : replies_) MPI_Request_free(&r);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Liveness::Serve() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kPing, comm_, &flag, &st) != MPI_SUCCESS || !flag) break;
    int token = 0;
    MPI_Recv(&token, 1, MPI_INT, st.MPI_SOURCE, kPing, comm_, MPI_STATUS_IGNORE);
    replies_.emplace_back();
    static const int kAlive = 1;
    MPI_Isend(&kAlive, 1, MPI_INT, st.MPI_SOURCE, kPong, comm_, &replies_.back());
  }
  std::erase_if(replies_, [](MPI_Request& r) {
    int done = 0;
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

std::vector<int> Liveness::Unresponsive(const std::vector<int>& world_ranks, double grace_s) {
  std::vector<int> targets;
  for (int r : world_ranks) {
    if (r != self_) targets.push_back(r);
  }
  std::vector<MPI_Request> recvs(targets.size()), sends(targets.size());
  std::vector<int> answers(targets.size(), 0);
  static const int kAsk = 1;
  for (size_t i = 0; i < targets.size(); ++i) {
    MPI_Irecv(&answers[i], 1, MPI_INT, targets[i], kPong, comm_, &recvs[i]);
    MPI_Isend(&kAsk, 1, MPI_INT, targets[i], kPing, comm_, &sends[i]);
  }
  std::vector<bool> answered(targets.size(), false);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < grace_s) {
    Serve();  // the members we ask may be asking us at the same time
    bool all = true;
    for (size_t i = 0; i < targets.size(); ++i) {
      if (!answered[i]) {
        int done = 0;
        MPI_Test(&recvs[i], &done, MPI_STATUS_IGNORE);
        answered[i] = done != 0;
      }
      all = all && answered[i];
    }
    if (all) break;
    sched_yield();
  }
  std::vector<int> silent;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!answered[i]) {
      silent.push_back(targets[i]);
      MPI_Cancel(&recvs[i]);
      MPI_Request_free(&recvs[i]);
    }
    // A ping to a dead rank may never complete; leave it to MPI rather than wait on it.
    int done = 0;
    MPI_Test(&sends[i], &done, MPI_STATUS_IGNORE);
    if (!done) MPI_Request_free(&sends[i]);
  }
  return silent;
}

}  // namespace parallax::executor
