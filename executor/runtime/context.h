#pragma once
// RuntimeContext: what every runtime component of one rank needs, passed explicitly (no globals).

#include <cstdint>

#include "executor/backend.h"
#include "executor/runtime/op_recorder.h"
#include "executor/runtime/process_groups.h"
#include "model/plan.h"

namespace parallax::executor {

struct RuntimeContext {
  Backend* backend = nullptr;
  ProcessGroups* groups = nullptr;
  OpRecorder* rec = nullptr;
  ModelSpec model;
  TrainingSpec training;
  Layout layout;

  int64_t seq = 0;           //!< sequence length of a sample
  int64_t batch = 0;         //!< sequences per micro-batch (layout.micro_batch)
  int64_t tokens = 0;        //!< seq * batch: rows of a full activation
  int64_t local_tokens = 0;  //!< rows of an activation between TP regions (tokens / tp with SP)
  bool sp = false;           //!< sequence parallelism on (and tp > 1)
  int64_t tp = 1;
  float loss_scale = 1;      //!< d(step loss)/d(token loss) = 1 / (global_batch * seq)

  Communicator& tp_comm() const { return *groups->tp; }
  Communicator& dp_comm() const { return *groups->dp; }
};

}  // namespace parallax::executor
