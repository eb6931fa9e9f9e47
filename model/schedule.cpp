#include "model/schedule.h"

#include <algorithm>

namespace parallax {

const char* ToString(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kGpipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kInterleaved: return "interleaved";
  }
  return "?";
}

Result<ScheduleKind> ScheduleFromString(const std::string& s) {
  for (ScheduleKind k : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    if (s == ToString(k)) return k;
  }
  return BadInput("unknown schedule \"" + s + "\" (expected gpipe, 1f1b or interleaved)");
}

Status ValidateSchedule(ScheduleKind kind, int64_t pp, int64_t microbatches, int64_t virtual_stages) {
  auto s = [](int64_t v) { return std::to_string(v); };
  if (microbatches <= 0) return BadInput("the step needs at least one micro-batch (got " + s(microbatches) + ")");
  if (virtual_stages <= 0) return BadInput("virtual_stages must be > 0");
  if (kind != ScheduleKind::kInterleaved && virtual_stages != 1) {
    return BadInput("virtual_stages=" + s(virtual_stages) + " needs schedule=interleaved");
  }
  if (kind == ScheduleKind::kInterleaved) {
    if (pp < 2) return BadInput("schedule=interleaved needs pp > 1");
    if (microbatches % pp != 0) {
      return BadInput("schedule=interleaved needs the micro-batch count (" + s(microbatches) +
                      ") to be a multiple of pp=" + s(pp));
    }
  }
  return Status::Ok();
}

std::vector<PipeOp> PipelineOrder(ScheduleKind kind, int64_t pp, int64_t pp_rank, int64_t microbatches,
                                  int64_t virtual_stages) {
  std::vector<PipeOp> order;
  const int64_t m = microbatches;
  if (kind == ScheduleKind::kGpipe) {
    for (int64_t i = 0; i < m; ++i) order.push_back({PipeOpKind::kForward, i, 0});
    for (int64_t i = m - 1; i >= 0; --i) order.push_back({PipeOpKind::kBackward, i, 0});
    return order;
  }
  if (kind == ScheduleKind::kOneFOneB) {
    const int64_t warmup = std::min(pp - pp_rank - 1, m);
    for (int64_t i = 0; i < warmup; ++i) order.push_back({PipeOpKind::kForward, i, 0});
    for (int64_t i = 0; i < m - warmup; ++i) {
      order.push_back({PipeOpKind::kForward, warmup + i, 0});
      order.push_back({PipeOpKind::kBackward, i, 0});
    }
    for (int64_t i = m - warmup; i < m; ++i) order.push_back({PipeOpKind::kBackward, i, 0});
    return order;
  }
  // Interleaved: virtual micro-batch k walks groups of pp micro-batches through chunk 0, then
  // chunk 1, ...; backwards visit chunks in reverse (Megatron-LM's get_model_chunk_id).
  const int64_t v = virtual_stages;
  const int64_t total = m * v;
  auto chunk_of = [&](int64_t k, bool forward) {
    const int64_t c = (k % (pp * v)) / pp;
    return forward ? c : v - 1 - c;
  };
  auto mb_of = [&](int64_t k) { return (k / (pp * v)) * pp + k % pp; };
  int64_t warmup = (pp - pp_rank - 1) * 2 + (v - 1) * pp;
  if (m == pp) warmup = total;
  warmup = std::min(warmup, total);
  for (int64_t k = 0; k < warmup; ++k) order.push_back({PipeOpKind::kForward, mb_of(k), chunk_of(k, true)});
  for (int64_t k = 0; k < total - warmup; ++k) {
    const int64_t f = warmup + k;
    order.push_back({PipeOpKind::kForward, mb_of(f), chunk_of(f, true)});
    order.push_back({PipeOpKind::kBackward, mb_of(k), chunk_of(k, false)});
  }
  for (int64_t k = total - warmup; k < total; ++k) {
    order.push_back({PipeOpKind::kBackward, mb_of(k), chunk_of(k, false)});
  }
  return order;
}

}  // namespace parallax
