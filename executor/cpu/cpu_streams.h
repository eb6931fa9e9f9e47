#pragma once
// Streams and events of the CPU backend. The compute stream is the host thread itself: kernels run
// when called, so its events complete when recorded. Each comm stream is a queue of operations
// (MPI non-blocking calls) run in order: the head is started when everything before it has
// completed, and the queue is advanced by Progress(), which the backend calls at every event,
// wait and large kernel, so communication overlaps the compute that follows it, as NCCL's streams
// overlap kernels. An operation that outlives its watchdog timeout fails the stream with an error
// naming the lost peer; the error is sticky (a failed stream stays failed, as a CUDA context does).

#include <chrono>
#include <cstdint>
#include <deque>
#include <span>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"

namespace parallax::executor {

//! One operation of a comm stream.
class CpuStreamOp {
 public:
  virtual ~CpuStreamOp() = default;
  //! Posts the operation (non-blocking).
  virtual Status Start() = 0;
  //! Non-blocking completion test.
  virtual Result<bool> Test() = 0;
  //! Seconds the operation may run before it is declared stuck.
  virtual double timeout_s() const = 0;
  //! The error when the operation did not complete in time (names the lost peer).
  virtual Error TimedOut() = 0;
};

class CpuStream final : public Stream {
 public:
  CpuStream(StreamKind kind, class CpuStreams* owner) : kind_(kind), owner_(owner) {}
  StreamKind kind() const override { return kind_; }
  //! The engine that runs this stream (communicators enqueue through it).
  class CpuStreams* owner() const { return owner_; }

 private:
  friend class CpuStreams;
  struct Item {
    std::unique_ptr<CpuStreamOp> op;  //!< an operation, or
    int64_t record_event = -1;        //!< an event completing here, or
    int64_t wait_event = -1;          //!< a wait for another stream's event
  };
  StreamKind kind_;
  class CpuStreams* owner_;
  std::deque<Item> queue_;
  bool head_started_ = false;
  std::chrono::steady_clock::time_point head_start_;
};

class CpuStreams {
 public:
  CpuStreams();

  Stream& stream(StreamKind s) { return *streams_[static_cast<size_t>(s)]; }
  //! Appends an operation to a comm stream (the communicators call this).
  Status Enqueue(Stream& s, std::unique_ptr<CpuStreamOp> op);

  Event Record(StreamKind s);
  Status Wait(StreamKind waiter, Event e);
  Status Synchronize(Event e);
  Status SynchronizeAll();
  Result<std::vector<int64_t>> TimesNs(Event origin, std::span<const Event> events);
  void Release(std::span<const Event> events);

  //! Advances every comm stream as far as it can without blocking.
  Status Progress();
  //! Fails the engine with `e` unless it has failed already (a kernel's error, Backend::Fail):
  //! every later wait returns it.
  void Fail(Error e) {
    if (failed_) failed_ = std::move(e);
  }

 private:
  static int64_t NowNs();
  int64_t NewEvent();
  bool Complete(int64_t id) const { return time_ns_[static_cast<size_t>(id)] >= 0; }
  Status Advance(CpuStream& s);
  //! Blocks (progressing every stream, yielding the core) until `done()`.
  template <class Done>
  Status Block(Done done);

  std::vector<std::unique_ptr<CpuStream>> streams_;
  std::vector<int64_t> time_ns_;  //!< per event: completion time, -1 while pending
  std::vector<int64_t> free_events_;
  Status failed_;
};

}  // namespace parallax::executor
