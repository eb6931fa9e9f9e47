#include "executor/cpu/cpu_streams.h"

#include "executor/cpu/wait_policy.h"

namespace parallax::executor {

CpuStreams::CpuStreams() {
  for (int s = 0; s < kStreamKinds; ++s) streams_.push_back(std::make_unique<CpuStream>(static_cast<StreamKind>(s), this));
}

int64_t CpuStreams::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t CpuStreams::NewEvent() {
  if (!free_events_.empty()) {
    const int64_t id = free_events_.back();
    free_events_.pop_back();
    time_ns_[static_cast<size_t>(id)] = -1;
    return id;
  }
  time_ns_.push_back(-1);
  return static_cast<int64_t>(time_ns_.size()) - 1;
}

Status CpuStreams::Enqueue(Stream& s, std::unique_ptr<CpuStreamOp> op) {
  if (!failed_) return failed_;
  auto& cs = static_cast<CpuStream&>(s);
  if (cs.kind() == StreamKind::kCompute) {
    // The compute stream is the host: run the operation to completion here.
    if (Status st = op->Start(); !st) return failed_ = st;
    const auto start = std::chrono::steady_clock::now();
    return Block([&]() -> Result<bool> {
      auto done = op->Test();
      if (done && !*done &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > op->timeout_s()) {
        return op->TimedOut();
      }
      return done;
    });
  }
  CpuStream::Item item;
  item.op = std::move(op);
  cs.queue_.push_back(std::move(item));
  return Advance(cs);
}

Event CpuStreams::Record(StreamKind s) {
  const int64_t id = NewEvent();
  CpuStream& cs = *streams_[static_cast<size_t>(s)];
  if (cs.queue_.empty()) {
    time_ns_[static_cast<size_t>(id)] = NowNs();
  } else {
    CpuStream::Item item;
    item.record_event = id;
    cs.queue_.push_back(std::move(item));
  }
  (void)Progress();
  return Event{id};
}

Status CpuStreams::Wait(StreamKind waiter, Event e) {
  if (!failed_) return failed_;
  if (!e.valid()) return {};
  if (waiter == StreamKind::kCompute) return Synchronize(e);
  CpuStream& cs = *streams_[static_cast<size_t>(waiter)];
  if (Complete(e.id) && cs.queue_.empty()) return failed_;
  CpuStream::Item item;
  item.wait_event = e.id;
  cs.queue_.push_back(std::move(item));
  return Advance(cs);
}

Status CpuStreams::Advance(CpuStream& s) {
  while (!s.queue_.empty()) {
    CpuStream::Item& head = s.queue_.front();
    if (head.record_event >= 0) {
      time_ns_[static_cast<size_t>(head.record_event)] = NowNs();
    } else if (head.wait_event >= 0) {
      if (!Complete(head.wait_event)) return {};
    } else {
      if (!s.head_started_) {
        if (Status st = head.op->Start(); !st) return failed_ = st;
        s.head_started_ = true;
        s.head_start_ = std::chrono::steady_clock::now();
      }
      auto done = head.op->Test();
      if (!done) return failed_ = done.error();
      if (!*done) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - s.head_start_).count() >
            head.op->timeout_s()) {
          return failed_ = head.op->TimedOut();
        }
        return {};
      }
      s.head_started_ = false;
    }
    s.queue_.pop_front();
  }
  return {};
}

Status CpuStreams::Progress() {
  if (!failed_) return failed_;
  // Two passes: a stream unblocked by an event of a later stream moves on in the second.
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& s : streams_) {
      if (Status st = Advance(*s); !st) return st;
    }
  }
  return {};
}

template <class Done>
Status CpuStreams::Block(Done done) {
  for (Backoff backoff;; backoff.Pause()) {
    if (Status st = Progress(); !st) return st;
    auto d = done();
    if (!d) return failed_ = d.error();
    if (*d) return {};
  }
}

Status CpuStreams::Synchronize(Event e) {
  if (!e.valid()) return failed_;
  return Block([&]() -> Result<bool> { return Complete(e.id); });
}

Status CpuStreams::SynchronizeAll() {
  return Block([&]() -> Result<bool> {
    for (auto& s : streams_) {
      if (!s->queue_.empty()) return false;
    }
    return true;
  });
}

Result<std::vector<int64_t>> CpuStreams::TimesNs(Event origin, std::span<const Event> events) {
  std::vector<int64_t> out;
  out.reserve(events.size());
  if (Status s = Synchronize(origin); !s) return s.error();
  const int64_t t0 = time_ns_[static_cast<size_t>(origin.id)];
  for (const Event& e : events) {
    if (Status s = Synchronize(e); !s) return s.error();
    out.push_back(time_ns_[static_cast<size_t>(e.id)] - t0);
  }
  return out;
}

void CpuStreams::Release(std::span<const Event> events) {
  for (const Event& e : events) {
    if (e.valid()) free_events_.push_back(e.id);
  }
}

}  // namespace parallax::executor
