#pragma once
// The synthetic "measured" trace of the refine tests: tp=2 gpt-tiny (bf16) as the empty database
// of `s` predicts it, marked measured, for a test to reshape.
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"
#include "scratch_dir.h"

namespace parallax::test {

//! The plan's arguments for simulate and refine.
inline std::string Tp2Plan(const Scratch& s) {
  return " --model gpt-tiny --precision bf16 --cluster " + s.cluster + " --plan tp=2,micro_batch=2,global_batch=8";
}

//! The predicted trace of Tp2Plan as a measured one (null when simulate failed, which it reports).
inline nlohmann::json NominalTp2Trace(const Scratch& s) {
  const std::string predicted = (s.dir / "predicted.json").string();
  auto sim = RunParallax("simulate" + Tp2Plan(s) + " --costdb " + s.db_file + " --trace " + predicted);
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  if (sim.exit_code != 0) return nullptr;
  nlohmann::json trace = nlohmann::json::parse(std::ifstream(predicted));
  trace["otherData"]["trace_kind"] = "measured";
  return trace;
}

}  // namespace parallax::test
