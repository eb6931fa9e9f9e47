#pragma once
// Host-plane point-to-point messages between the members of a communicator, for the classic modes
// (parameter servers, async/SSP, backup workers): a server answers whichever worker asks first,
// so it receives from any source, and a sender never waits for its receiver (messages are copied
// and delivered in the background). Messages from one sender with one tag arrive in order (MPI's
// non-overtaking rule). Every blocking wait runs under the communicator's watchdog.

#include <cstdint>

#include "model/result.h"

namespace parallax::executor {

inline constexpr int kAnySource = -1;

class Mailbox {
 public:
  virtual ~Mailbox() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  //! Queues a copy of `bytes` bytes for member `peer` under `tag`; returns without waiting.
  virtual Status Post(int peer, int tag, const void* data, int64_t bytes) = 0;
  //! Whether a message with `tag` from `peer` (kAnySource: anyone) is waiting; sets *source and
  //! *bytes (its size) when given.
  virtual Result<bool> Poll(int peer, int tag, int* source, int64_t* bytes) = 0;
  //! Receives exactly `bytes` bytes of the next message with `tag` from `peer` (or anyone), waiting
  //! for it; returns its sender.
  virtual Result<int> Receive(int peer, int tag, void* data, int64_t bytes) = 0;
  //! Waits until every posted message has been delivered.
  virtual Status Flush() = 0;
};

}  // namespace parallax::executor
