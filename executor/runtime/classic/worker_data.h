#pragma once
// The samples one worker of a classic mode reads. A worker trains on its own (dp=1 with a global
// batch of global_batch/W), so its local sample i is mapped back to the job's sample stream:
//   iid          the all-reduce path's slice: step s, worker w -> samples s*B + w*B/W + [0, B/W)
//   label_skew   the first of 4W consecutive candidates whose first target token lies in worker
//                w's 1/W of the vocabulary (non-IID: each worker sees its own part of the labels)
//   contiguous   worker w reads the stream from sample w * 2^20 on (its own region of a corpus)

#include <cstdint>
#include <memory>

#include "executor/runtime/data.h"
#include "model/sync_mode.h"

namespace parallax::executor {

std::unique_ptr<DataSource> WorkerData(std::unique_ptr<DataSource> base, FederatedRule rule, int64_t worker,
                                       int64_t workers, int64_t global_batch, int64_t vocab);

}  // namespace parallax::executor
