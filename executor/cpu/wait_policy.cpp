#include "executor/cpu/wait_policy.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace parallax::executor {
namespace {
// Written once at start-up before any wait; read by every wait after.
std::atomic<const WaitPolicy*> g_policy{nullptr};
const WaitPolicy kDedicated = WaitPolicy::Dedicated();
WaitPolicy g_custom;
}  // namespace

const WaitPolicy& CurrentWaitPolicy() {
  const WaitPolicy* p = g_policy.load(std::memory_order_acquire);
  return p ? *p : kDedicated;
}

void SetWaitPolicy(const WaitPolicy& p) {
  g_custom = p;
  g_policy.store(&g_custom, std::memory_order_release);
}

void Backoff::Pause() {
  ++polls_;
  if (polls_ <= policy_.spin_polls) return;
  if (polls_ <= policy_.yield_polls) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(policy_.sleep_us));
}

}  // namespace parallax::executor
