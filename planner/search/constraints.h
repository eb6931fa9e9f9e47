#pragma once
// `--fix k=v,...`: pins any layout dimension in the search (keys as in the inline plan form).

#include <cstdint>
#include <optional>
#include <string>

#include "model/plan.h"

namespace parallax::planner {

struct Constraints {
  std::optional<int64_t> dp, tp, pp, cp, zero_stage, micro_batch, global_batch, virtual_stages, ep, etp;
  std::optional<Routing> routing;
  std::optional<Recompute> recompute;
  std::optional<uint32_t> recompute_modules;  //!< selective recompute's modules (implies recompute selective)
  std::optional<int64_t> first_stage_layers, last_stage_layers;  //!< the explicit pipeline split
  std::optional<ScheduleKind> schedule;
  std::optional<bool> sequence_parallel;
  //! Classic mode every searched layout takes (sync, servers, compression, data keys); default: all-reduce.
  SyncMode sync;

  bool Admits(const Layout& l) const;
};

//! Parses "tp=8,recompute=full,schedule=interleaved"; unknown keys and bad values are BadInput.
Result<Constraints> ParseConstraints(const std::string& text);

}  // namespace parallax::planner
