// `parallax refine` samples the DP collectives of a measured run: the planner's predicted trace
// and the executor's trace share one DP identity per gradient bucket (a layer's parameter group,
// the word embedding, the learned positions, the head) with its message size, so a measured
// bucket's time becomes a collective point at that size. A trace whose DP all-reduces each took
// 3x the predicted time makes the same buckets 3x slower in a held-out layout that has them (a
// different micro-batch size: same buckets, other compute shapes), and leaves compute alone.
//
// On the CPU backend a collective advances only when the rank's host thread polls it (MPI between
// ops): issuing a bucket costs the host a gap before the next op, and the slice lasts until a later
// poll sees it done, across the compute that ran meanwhile. Read as a collective's length, such a
// slice would charge that compute twice; refine reads the cost (the gap, and any slowdown of the
// compute inside) instead, and the refined database must predict the traced step again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"
#include "scratch_dir.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr double kSlowdown = 3.0;

// Durations (us) of the trace's DP all-reduces on rank 0, by (layer, bytes).
std::map<std::pair<int64_t, int64_t>, double> DpAllReduces(const Json& trace) {
  std::map<std::pair<int64_t, int64_t>, double> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("args")) continue;
    const Json& a = e["args"];
    if (a.value("op", "") != "dp_allreduce" || a.value("rank", -1) != 0) continue;
    out[{a["layer"].get<int64_t>(), a.value("bytes", int64_t{-1})}] = e["dur"].get<double>();
  }
  return out;
}

using test::Scratch;

TEST(RefineDpCollectives, MeasuredBucketTimesBecomeCollectivePoints) {
  const Scratch scratch("refine_dp");
  const fs::path& dir = scratch.dir;
  const std::string& cluster = scratch.cluster;
  const std::string& db_file = scratch.db_file;

  // The traced layout's predicted trace, its DP all-reduces 3x longer, as measured.
  const std::string traced = "dp=2,micro_batch=2,global_batch=8";
  const std::string predicted = (dir / "predicted.json").string();
  auto sim = test::RunParallax("simulate --model gpt-tiny --cluster " + cluster + " --plan " + traced +
                               " --costdb " + db_file + " --trace " + predicted);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  Json trace = Json::parse(std::ifstream(predicted));
  const auto before = DpAllReduces(trace);
  // One per layer (4) and one per outer group (word embedding, positions, head), each with its size.
  ASSERT_EQ(before.size(), 7u);
  for (const auto& [key, us] : before) ASSERT_GT(key.second, 0) << "layer " << key.first << ": no message size";
  trace["otherData"]["trace_kind"] = "measured";
  // Collectives that ran beside compute (as NCCL's do): each slice is how long its all-reduce took.
  trace["otherData"]["comm_progress"] = "device";
  for (auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.contains("args") && e["args"].value("op", "") == "dp_allreduce") {
      e["dur"] = e["dur"].get<double>() * kSlowdown;
    }
  }
  const std::string measured = (dir / "measured.json").string();
  std::ofstream(measured) << trace.dump();

  const std::string refined = (dir / "refined.json").string();
  auto r = test::RunParallax("refine --model gpt-tiny --cluster " + cluster + " --plan " + traced + " --trace " +
                             measured + " --costdb " + db_file + " -o " + refined + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json out = Json::parse(r.out);
  const Json& samples = out["samples"];
  // Four distinct sizes: a layer's bucket, the word embedding, the positions, the head.
  EXPECT_EQ(samples["collective_points_added"].get<int>() + samples["collective_points_replaced"].get<int>(), 4)
      << r.out;
  for (const auto& [why, n] : out["not_sampled"].items()) {
    EXPECT_EQ(why.find("dp_"), std::string::npos) << why << " (" << n << ")";
  }

  // Held out: twice the micro-batch. The buckets are the same; each all-reduce is now 3x.
  const std::string held_out = "dp=2,micro_batch=4,global_batch=8";
  auto time_dp = [&](const std::string& db) {
    const std::string file = (dir / ("held_out_" + fs::path(db).stem().string() + ".json")).string();
    auto s = test::RunParallax("simulate --model gpt-tiny --cluster " + cluster + " --plan " + held_out +
                               " --costdb " + db + " --trace " + file);
    EXPECT_EQ(s.exit_code, 0) << s.err;
    return DpAllReduces(Json::parse(std::ifstream(file)));
  };
  const auto calibrated = time_dp(db_file), after = time_dp(refined);
  ASSERT_EQ(calibrated.size(), 7u);
  ASSERT_EQ(after.size(), 7u);
  for (const auto& [key, us] : calibrated) {
    // Trace times are microseconds with 3 decimals: compare at that resolution.
    EXPECT_NEAR(after.at(key), kSlowdown * us, 2e-3 + 1e-6 * us) << "layer " << key.first << ", " << key.second << " B";
  }
}

// The predicted trace rewritten as the CPU backend records it: each bucket reduced beside the
// backward costs the host `gap_us` at its issue (every later slice of the rank moves by that) and
// its slice ends with the compute op after it, where a poll sees it done. Buckets the grad-norm read
// waits for keep their length.
Json AsPolled(Json trace, double gap_us) {
  std::map<int64_t, std::vector<Json*>> by_rank;
  for (auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.contains("args")) by_rank[e["args"].value("rank", int64_t{-1})].push_back(&e);
  }
  for (auto& [rank, ev] : by_rank) {
    std::stable_sort(ev.begin(), ev.end(), [](const Json* a, const Json* b) { return (*a)["ts"] < (*b)["ts"]; });
    // Issue order: a bucket and the compute op predicted to start with it share a start; the
    // bucket comes first.
    std::stable_sort(ev.begin(), ev.end(), [](const Json* a, const Json* b) {
      if ((*a)["ts"] != (*b)["ts"]) return (*a)["ts"] < (*b)["ts"];
      return (*a)["args"].value("op", "") == "dp_allreduce" && (*b)["args"].value("op", "") != "dp_allreduce";
    });
    double shift = 0;
    for (size_t i = 0; i < ev.size(); ++i) {
      Json& e = *ev[i];
      e["ts"] = e["ts"].get<double>() + shift;
      if (e["args"].value("op", "") != "dp_allreduce") continue;
      const Json* next = nullptr;
      for (size_t j = i + 1; j < ev.size() && next == nullptr; ++j) {
        const std::string op = (*ev[j])["args"].value("op", "");
        if (op.rfind("dp_", 0) != 0) next = ev[j];
      }
      if (next == nullptr) continue;
      const std::string op = (*next)["args"].value("op", "");
      if (op == "grad_clip" || op == "optimizer") continue;
      shift += gap_us;
      e["dur"] = gap_us + (*next)["dur"].get<double>();
    }
  }
  return trace;
}

TEST(RefineDpCollectives, PolledBucketsCostTheirGapNotTheComputeTheySpan) {
  const Scratch scratch("refine_polled");
  const fs::path& dir = scratch.dir;
  const std::string& cluster = scratch.cluster;
  const std::string& db_file = scratch.db_file;
  const std::string traced = "dp=2,micro_batch=8,global_batch=16";
  const std::string predicted = (dir / "predicted.json").string();
  auto sim = test::RunParallax("simulate --model gpt-tiny --cluster " + cluster + " --plan " + traced +
                               " --costdb " + db_file + " --trace " + predicted + " --all-ranks");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  Json trace = AsPolled(Json::parse(std::ifstream(predicted)), 40.0);
  trace["otherData"]["trace_kind"] = "measured";

  auto refine = [&](const std::string& progress) {
    trace["otherData"]["comm_progress"] = progress;
    const std::string measured = (dir / ("measured-" + progress + ".json")).string();
    std::ofstream(measured) << trace.dump();
    auto r = test::RunParallax("refine --model gpt-tiny --cluster " + cluster + " --plan " + traced + " --trace " +
                               measured + " --costdb " + db_file + " -o " + (dir / "refined.json").string() + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Json::parse(r.out);
  };
  const Json polled = refine("host");
  const Json beside = refine("device");
  EXPECT_TRUE(polled["samples"]["collectives_polled"].get<bool>());
  EXPECT_FALSE(beside["samples"]["collectives_polled"].get<bool>());
  const double err_polled = polled["step_time"]["error_after"].get<double>();
  const double err_beside = beside["step_time"]["error_after"].get<double>();
  // Read as lengths, the slices charge the compute they span a second time.
  EXPECT_GT(err_beside, 0.05) << "polled " << err_polled << ", beside " << err_beside;
  EXPECT_LT(std::abs(err_polled), 0.02) << "polled " << err_polled << ", beside " << err_beside;
}

}  // namespace
}  // namespace parallax
