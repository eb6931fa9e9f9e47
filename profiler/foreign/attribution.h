#pragma once
// Attribution of a framework's profiled events to op families and catalogue op candidates
// (attribution_rules.h). The units timed are the device kernels of a GPU trace (each tied to the
// host op that launched it by its Kineto correlation id, and through that op's enclosing ranges,
// module hierarchy and, for a backward node, its forward op's, to the framework's modules), or the
// top-level host ops of a CPU-only trace (aten ops and autograd nodes; nested ops are their work).

#include <cstdint>
#include <string>
#include <vector>

#include "model/op_identity.h"
#include "profiler/foreign/attribution_rules.h"
#include "profiler/foreign/kineto_events.h"

namespace parallax::profiler {

struct AttributedUnit {
  size_t event = 0;  //!< index into KinetoEvents::events
  int64_t start_ns = 0, dur_ns = 0;
  bool device = false;  //!< a device kernel / memcpy (false: a host op of a CPU trace)
  bool comm = false;    //!< a collective (NCCL kernel, gloo/nccl range)
  const AttributionRule* rule = nullptr;  //!< nullptr: glue, the time of the op around it
  Phase phase = Phase::kFwd;              //!< kFwd, kBwd (autograd) or kOptim
  int64_t bytes = -1;                     //!< a collective's message bytes when recorded
  int32_t group_size = 0;
  int64_t nested_events = 0;  //!< recorded host events inside a host unit (profiler overhead)
};

struct Attribution {
  std::vector<AttributedUnit> units;  //!< by start
  bool device_trace = false;          //!< units are device kernels
  int64_t first_ns = 0, last_ns = 0;  //!< span of the units (the profiled step(s))
  //! Profiler cost per recorded host event: the mean, over ops that only forward to one
  //! nested op (aten::t -> transpose, reshape -> view, ...), of the parent's time less the
  //! child's, i.e. the child's enter and exit bookkeeping plus a dispatch. 0 when none.
  double overhead_per_event_s = 0;
  int64_t overhead_pairs = 0;  //!< parent/child pairs it is the mean of
  int64_t recorded_events = 0;
  //! Device units whose launching host op was found (by correlation id): none when the profiler
  //! recorded the device only, and then no unit has a module or an autograd phase.
  int64_t launched_units = 0;
};

Attribution Attribute(const KinetoEvents& ev, const AttributionTable& table);

//! The family of a unit ("glue" when no rule matched).
inline std::string_view FamilyOf(const AttributedUnit& u) { return u.rule ? u.rule->family : "glue"; }

}  // namespace parallax::profiler
