#include "executor/cpu/kernel_threads.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace parallax::executor {
namespace {

thread_local bool t_in_chunk = false;

// One job at a time: the caller publishes it under mu_, workers join it under mu_ (counted in
// active_), take chunk numbers from next_, and leave under mu_; the caller returns once it has no
// chunks left and no worker is inside, so no worker ever holds a finished job's body.
class Pool {
 public:
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() { Stop(); }

  void Resize(int64_t threads) {
    const std::lock_guard<std::mutex> run(run_mu_);
    threads = std::max<int64_t>(1, threads);
    if (threads == threads_.load() && static_cast<int64_t>(workers_.size()) == threads - 1) return;
    Stop();
    {
      const std::lock_guard<std::mutex> lk(mu_);
      stop_ = false;
    }
    workers_.reserve(static_cast<size_t>(threads - 1));
    for (int64_t i = 1; i < threads; ++i) {
      try {
        workers_.emplace_back([this] { Work(); });
      } catch (const std::system_error&) {
        break;  // no more threads can be started: run with the ones there are
      }
    }
    threads_.store(static_cast<int64_t>(workers_.size()) + 1);
  }

  int64_t Threads() const { return threads_.load(); }

  // False when the caller must run the chunks itself (nested call, pool busy or empty).
  bool Run(int64_t chunks, const std::function<void(int64_t)>& chunk) {
    if (t_in_chunk) return false;
    const std::unique_lock<std::mutex> run(run_mu_, std::try_to_lock);
    if (!run.owns_lock() || workers_.empty()) return false;
    {
      const std::lock_guard<std::mutex> lk(mu_);
      job_ = &chunk;
      chunks_ = chunks;
      next_.store(0);
      ++generation_;
    }
    wake_.notify_all();
    Drain(chunk, chunks);
    std::unique_lock<std::mutex> lk(mu_);
    idle_.wait(lk, [this] { return active_ == 0; });
    job_ = nullptr;
    return true;
  }

 private:
  void Drain(const std::function<void(int64_t)>& chunk, int64_t chunks) {
    t_in_chunk = true;
    for (int64_t c = next_.fetch_add(1); c < chunks; c = next_.fetch_add(1)) chunk(c);
    t_in_chunk = false;
  }

  void Work() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t)>* job = nullptr;
      int64_t chunks = 0;
      {
        std::unique_lock<std::mutex> lk(mu_);
        wake_.wait(lk, [&] { return stop_ || (job_ != nullptr && generation_ != seen); });
        if (stop_) return;
        seen = generation_;
        job = job_;
        chunks = chunks_;
        ++active_;
      }
      Drain(*job, chunks);
      {
        const std::lock_guard<std::mutex> lk(mu_);
        --active_;
      }
      idle_.notify_one();
    }
  }

  void Stop() {
    {
      const std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    threads_.store(1);
  }

  std::mutex run_mu_;  // one job at a time; Resize waits for it
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t chunks_ = 0;
  uint64_t generation_ = 0;
  int64_t active_ = 0;
  bool stop_ = false;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> threads_{1};
  std::vector<std::thread> workers_;
};

Pool& ThePool() {
  static Pool pool;
  return pool;
}

}  // namespace

void SetKernelThreads(int64_t threads) { ThePool().Resize(threads); }

int64_t KernelThreads() { return ThePool().Threads(); }

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks = (n + grain - 1) / grain;
  const auto chunk = [&](int64_t c) { body(c * grain, std::min(n, (c + 1) * grain)); };
  if (chunks > 1 && ThePool().Threads() > 1 && ThePool().Run(chunks, chunk)) return;
  for (int64_t c = 0; c < chunks; ++c) chunk(c);
}

}  // namespace parallax::executor
