#pragma once
// Shared by the trace tests: an op identity from its fields.

#include <cstdint>

#include "model/op_identity.h"

namespace parallax::traces::testing {

inline OpIdentity Id(int64_t step, int64_t rank, int64_t mb, int64_t layer, OpKind op, Phase phase,
                     int64_t stage = 0) {
  OpIdentity id;
  id.step = step;
  id.rank = rank;
  id.microbatch = mb;
  id.stage = stage;
  id.layer = layer;
  id.op = op;
  id.phase = phase;
  return id;
}

}  // namespace parallax::traces::testing
