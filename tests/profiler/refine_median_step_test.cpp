// `parallax refine` charges the op times of the run's median step, the step the run is measured
// by (model/step_time.h), not their mean over every instance. The "measured" trace is tp=2's
// nominal prediction repeated for 6 steps with every compute op of one step twice as long: the
// instance mean is 1.2x the medians (not a disturbed run: below 1.25), the median step 1.0x. A
// refined database that charged the mean predicted each op 20% over the step the run is measured
// by (the +15% of a quiet run with one slowed step).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "nominal_trace.h"
#include "run_command.h"
#include "scratch_dir.h"

namespace parallax {
namespace {

using Json = nlohmann::json;

TEST(RefineMedianStep, AMinorityOfSlowedStepsIsNotChargedToEveryOp) {
  const test::Scratch s("median_step");
  const std::string plan = test::Tp2Plan(s);
  Json trace = test::NominalTp2Trace(s);
  ASSERT_FALSE(trace.is_null());
  double span = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X") span = std::max(span, e["ts"].get<double>() + e["dur"].get<double>());
  }
  Json events = Json::array();
  constexpr int kSteps = 6, kSlowStep = 3;
  for (int step = 0; step < kSteps; ++step) {
    // The slowed step stretches each compute op in place (the ops after it keep their starts);
    // metadata events once.
    for (Json e : trace["traceEvents"]) {
      if (e.value("ph", "") == "X") {
        e["ts"] = e["ts"].get<double>() + step * 2 * span;
        e["args"]["step"] = step;
        if (step == kSlowStep && e.value("cat", "") == "compute") e["dur"] = 2 * e["dur"].get<double>();
      } else if (step > 0) {
        continue;
      }
      events.push_back(e);
    }
  }
  trace["traceEvents"] = events;
  const std::string measured = (s.dir / "measured.json").string();
  std::ofstream(measured) << trace.dump();
  const std::string refined = (s.dir / "refined.json").string();
  auto r = test::RunParallax("refine" + plan + " --trace " + measured + " --costdb " + s.db_file + " -o " + refined +
                             " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  std::printf("run_op_times %s\n", j["run_op_times"].dump().c_str());
  EXPECT_NEAR(j["run_op_times"]["mean_over_median"].get<double>(), 1.2, 0.02);
  EXPECT_FALSE(j["run_op_times"]["disturbed"].get<bool>());
  EXPECT_NEAR(j["run_op_times"]["median_step"].get<double>(), 1.0, 1e-3);
  EXPECT_NEAR(Json::parse(std::ifstream(refined))["run_op_times"]["mean_over_median"].get<double>(), 1.0, 1e-3);
  // The refined step is the measured (median) one, not 20% of compute over it.
  EXPECT_LT(std::abs(j["step_time"]["error_after"].get<double>()), 0.02) << j["step_time"].dump();
}

}  // namespace
}  // namespace parallax
