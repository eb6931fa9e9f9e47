#pragma once
// How the CPU backend waits (stream events, MPI requests, liveness answers): poll, and between
// unsuccessful polls spin, then yield the core, then sleep. One policy per process, chosen once the
// job knows how its ranks share the node's CPUs (executor/runtime/host_threads.h):
//  - ranks with a CPU each: spin long (a message from a peer on another core arrives within
//    microseconds, and a sleeping waiter wakes a scheduler tick late);
//  - more ranks than CPUs (mpirun --oversubscribe): yield at once and sleep soon, because the peer a
//    rank waits for needs the very core the waiter holds.

#include <cstdint>

namespace parallax::executor {

struct WaitPolicy {
  int64_t spin_polls = 2048;    //!< polls before the first yield
  int64_t yield_polls = 16384;  //!< polls (counted from the start) before sleeping between polls
  int64_t sleep_us = 50;

  static WaitPolicy Dedicated() { return {}; }
  static WaitPolicy Oversubscribed() { return {0, 32, 50}; }
};

//! The process's policy (Dedicated until SetWaitPolicy).
const WaitPolicy& CurrentWaitPolicy();
void SetWaitPolicy(const WaitPolicy& p);

//! One wait: call Pause() after every unsuccessful poll.
class Backoff {
 public:
  Backoff() : policy_(CurrentWaitPolicy()) {}
  void Pause();
  int64_t polls() const { return polls_; }

 private:
  WaitPolicy policy_;
  int64_t polls_ = 0;
};

}  // namespace parallax::executor
