#pragma once
// An all-to-all over a communicator built from its grouped point-to-point operations (the backend
// seam has no all-to-all entry; NCCL builds its own the same way): the MoE token dispatch and
// combine (runtime/moe_layer.h) and calibrate's all-to-all probe.

#include <cstdint>
#include <vector>

#include "executor/backend.h"

namespace parallax::executor {

//! Sends send_counts[r] elements of `send` (blocks in rank order) to each other rank r and receives
//! recv_counts[r] elements from it into `recv` (blocks in rank order), as one grouped stream
//! operation on `s`. This rank's own block is not moved: the caller copies it when it needs it.
Status GroupedAllToAll(Communicator& c, DevPtr send, const std::vector<int64_t>& send_counts, DevPtr recv,
                       const std::vector<int64_t>& recv_counts, int tag, Stream& s);

}  // namespace parallax::executor
