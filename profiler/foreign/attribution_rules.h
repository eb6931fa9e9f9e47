#pragma once
// How a framework's profiled ops map onto the op catalogue (model/op_catalogue.h): one table per
// implementation, data rather than code. A rule looks at one kind of name in an event's context
// (an nn.Module / record_function range, a host op, a device kernel) and gives the op family and
// the catalogue ops the event can belong to. Which of those candidates it is follows from the
// plan's op order (profiler/foreign/op_assignment.h): a layer norm is attn_norm, mlp_norm or
// final_norm by where it falls. Rules are tried in table order, the first that matches any
// frame of the event wins; an event no rule matches is glue: time of the op around it.
//
// Patterns are globs: '*' matches any run of characters ("aten::mm" exactly, "*MmBackward0" a suffix).

#include <string>
#include <string_view>
#include <vector>

#include "model/op_identity.h"
#include "model/result.h"

namespace parallax::profiler {

//! Where a rule looks: device kernel names, or host names (ops and ranges alike: the array form
//! does not tell them apart; the two kinds document what a rule expects).
enum class FrameKind { kRange, kHostOp, kKernel };

struct AttributionRule {
  FrameKind on = FrameKind::kHostOp;
  std::string_view pattern;
  std::string_view family;  //!< "gemm", "attention", "norm", "activation", "embedding", "loss", "optimizer",
                            //!< "grad_clip", "collective", "memory", "glue"
  std::vector<OpKind> ops;  //!< catalogue ops it can be; empty: attributed to its family only
};

struct AttributionTable {
  std::string implementation;
  std::string source;  //!< where the names come from
  std::vector<AttributionRule> rules;
  //! Host ranges that only wrap others (a profiler step, DDP's forward, a module): never a unit.
  std::vector<std::string_view> wrappers;
};

//! The range torch.profiler records around each step under a schedule ("ProfilerStep#N"): a wrapper
//! of every table, and where the op assignment starts a step's ops afresh.
inline constexpr std::string_view kProfilerStepPattern = "ProfilerStep#*";

//! The glob `pattern` ('*' only) against the whole of `name`.
bool PatternMatches(std::string_view pattern, std::string_view name);

//! The table of `implementation` ("pytorch", "megatron-core", "deepspeed"; "parallax" and the
//! Megatron-LM presets read the megatron-core or pytorch names). Unknown: bad input listing them.
Result<const AttributionTable*> AttributionTableFor(const std::string& implementation);

}  // namespace parallax::profiler
