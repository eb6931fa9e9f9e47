#include "profiler/calibrate/backend_timer.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace parallax::profiler {

Result<std::vector<double>> TimeRuns(executor::Backend& backend, executor::StreamKind s, int64_t n,
                                     const std::function<Status()>& run, const std::function<Status()>& before_each) {
  std::vector<executor::Event> events;
  events.reserve(static_cast<size_t>(2 * n));
  auto release = [&] { backend.ReleaseEvents(events); };
  for (int64_t i = 0; i < n; ++i) {
    if (before_each) {
      if (Status st = before_each(); !st) {
        release();
        return st.error();
      }
    }
    events.push_back(backend.RecordEvent(s));
    if (Status st = run(); !st) {
      release();
      return st.error();
    }
    events.push_back(backend.RecordEvent(s));
  }
  if (Status st = backend.SynchronizeEvent(events.back()); !st) {
    release();
    return st.error();
  }
  auto ns = backend.EventTimesNs(events.front(), events);
  release();
  if (!ns) return ns.error();
  std::vector<double> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = (*ns)[static_cast<size_t>(2 * i + 1)] - (*ns)[static_cast<size_t>(2 * i)];
    out.push_back(static_cast<double>(std::max<int64_t>(d, 1)) * 1e-9);
  }
  return out;
}

MeasureFn Agreed(executor::Communicator& world, MeasureFn fn, RankReduce reduce, const std::atomic<bool>* interrupt,
                 std::atomic<bool>* stop) {
  return [&world, fn = std::move(fn), reduce, interrupt, stop](int64_t n) -> Result<std::vector<double>> {
    auto local = fn(n);
    // flags[0]: this rank failed, flags[1]: interrupted; then the n timings.
    std::vector<double> buf(static_cast<size_t>(n) + 2, 0.0);
    buf[0] = local ? 0.0 : 1.0;
    buf[1] = interrupt != nullptr && interrupt->load() ? 1.0 : 0.0;
    if (local && static_cast<int64_t>(local->size()) == n) std::copy(local->begin(), local->end(), buf.begin() + 2);
    std::vector<double> flags{buf[0], buf[1]};
    PX_TRY(world.HostAllReduce(flags.data(), 2, executor::ReduceOp::kMax));
    if (flags[1] > 0) {
      if (stop != nullptr) stop->store(true);
      return IoError("interrupted");
    }
    if (flags[0] > 0) {
      // The lowest failing rank's message, so every rank records the same reason.
      constexpr size_t kLen = 240;
      std::array<char, kLen> mine{};
      if (!local) std::strncpy(mine.data(), local.error().message.c_str(), kLen - 1);
      std::vector<char> all(kLen * static_cast<size_t>(world.size()));
      PX_TRY(world.HostAllGather(mine.data(), all.data(), kLen));
      for (int r = 0; r < world.size(); ++r) {
        const char* m = all.data() + kLen * static_cast<size_t>(r);
        if (m[0] != '\0') return Error{"rank " + std::to_string(r) + ": " + std::string(m, strnlen(m, kLen)), ErrorKind::kInternal};
      }
      return Error{"a rank failed", ErrorKind::kInternal};
    }
    std::vector<double> times(buf.begin() + 2, buf.end());
    PX_TRY(world.HostAllReduce(times.data(), n,
                               reduce == RankReduce::kMax ? executor::ReduceOp::kMax : executor::ReduceOp::kSum));
    if (reduce == RankReduce::kMean) {
      for (double& t : times) t /= static_cast<double>(world.size());
    }
    return times;
  };
}

MeasureFn InTurns(executor::Communicator& world, MeasureFn fn, Turns t) {
  if (t.count <= 1) return fn;
  return [&world, fn = std::move(fn), t](int64_t n) -> Result<std::vector<double>> {
    Result<std::vector<double>> mine = std::vector<double>{};
    for (int64_t turn = 0; turn < t.count; ++turn) {
      if (turn == t.mine) mine = fn(n);
      PX_TRY(world.Barrier());
    }
    return mine;
  };
}

Status AllPrepared(executor::Communicator& world, Status local) {
  double failed = local ? 0.0 : 1.0;
  PX_TRY(world.HostAllReduce(&failed, 1, executor::ReduceOp::kMax));
  if (!local) return local;
  if (failed > 0) return Error{"another rank could not prepare this measurement", ErrorKind::kIo};
  return {};
}

}  // namespace parallax::profiler
