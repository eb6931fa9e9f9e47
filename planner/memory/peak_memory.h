#pragma once
// The search's memory check: the peak over the few pipeline ranks that can hold it, instead of
// every rank (PeakMemoryBytes).

#include <cstdint>

#include "model/plan.h"

namespace parallax::planner {

//! Peak bytes over the pipeline ranks that can hold it: rank 0 (embedding, most micro-batches in
//! flight), the first rank holding more layers than the one before it (uneven splits), the last
//! (LM head).
int64_t FastPeakMemory(const Plan& plan);

}  // namespace parallax::planner
