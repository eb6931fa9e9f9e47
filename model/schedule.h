#pragma once
// Pipeline schedules as an op order per pipeline rank. One definition, two users: the planner's
// simulator and the executor run exactly this order.

#include <cstdint>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax {

enum class ScheduleKind { kGpipe, kOneFOneB, kInterleaved };

enum class PipeOpKind { kForward, kBackward };

//! One forward or backward of one micro-batch through one model chunk on this pipeline rank.
struct PipeOp {
  PipeOpKind kind = PipeOpKind::kForward;
  int64_t microbatch = 0;
  int64_t chunk = 0;  //!< virtual stage on this rank, 0..virtual_stages-1

  bool operator==(const PipeOp&) const = default;
};

//! Model stage (0..pp*v-1) that chunk `chunk` of pipeline rank `pp_rank` holds:
//! Megatron's interleaving puts stage chunk*pp + pp_rank on rank pp_rank.
inline int64_t ModelStage(int64_t pp, int64_t pp_rank, int64_t chunk) { return chunk * pp + pp_rank; }

//! Checks schedule parameters: virtual_stages > 1 only for interleaved, and interleaved needs
//! pp > 1 and microbatches divisible by pp (Megatron's rule).
Status ValidateSchedule(ScheduleKind kind, int64_t pp, int64_t microbatches, int64_t virtual_stages);

//! The order in which pipeline rank `pp_rank` runs its forwards and backwards for one step.
//! GPipe: all forwards, then all backwards (reverse order).
//! 1F1B: pp-rank-1 warm-up forwards, steady one-forward-one-backward, cool-down backwards.
//! Interleaved 1F1B: Narayanan et al. SC'21 section 2.2.2, depth-first over groups of pp micro-batches.
std::vector<PipeOp> PipelineOrder(ScheduleKind kind, int64_t pp, int64_t pp_rank,
                                  int64_t microbatches, int64_t virtual_stages);

const char* ToString(ScheduleKind k);
Result<ScheduleKind> ScheduleFromString(const std::string& s);

}  // namespace parallax
