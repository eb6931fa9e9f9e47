#pragma once
// Shared by the planner tests: a layout with only its parallel degrees set.

#include <cstdint>

#include "model/plan.h"

namespace parallax::planner::testing {

inline Layout L(int64_t dp, int64_t tp, int64_t pp, int64_t cp = 1) {
  Layout l;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  l.cp = cp;
  return l;
}

}  // namespace parallax::planner::testing
