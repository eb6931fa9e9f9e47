// `parallax calibrate --import-nccl-tests`: writes a cost database that `plan --costdb` accepts,
// and a malformed output exits 2 naming the file and line without writing anything.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;

std::string Shared(const std::string& name) { return std::string(PARALLAX_SHARED_DIR) + "/nccl-tests/" + name; }

TEST(CliCalibrate, ImportFeedsThePlanner) {
  const std::string out = (fs::temp_directory_path() / "parallax_import_db.json").string();
  fs::remove(out);
  auto r = test::RunParallax("calibrate --import-nccl-tests " + Shared("a100_1node8_all_reduce_perf_superbench.txt") +
                             " " + Shared("a100_1node8_all_gather_perf_superbench.txt") + " " +
                             Shared("a100_1node8_reduce_scatter_perf_superbench.txt") + " --device a100-sxm-80g -o " +
                             out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["imported"].size(), 6u);
  EXPECT_EQ(j["device"], "a100-sxm-80g");
  auto plan = test::RunParallax("plan --model gpt-1.3b --cluster dgx-a100 --global-batch 64 --top 1 --costdb " + out +
                                " --json");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
}

TEST(CliCalibrate, MalformedOutputExitsTwoAndWritesNothing) {
  const std::string bad = test::WriteTempFile(
      "all_reduce_perf_bad.txt",
      "# Using devices\n#  Rank  0 Group  0 Pid 1 on a device  0 [0x0f] NVIDIA H100 80GB HBM3\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n           8             2     float     sum      -1    oops\n");
  const std::string out = (fs::temp_directory_path() / "parallax_import_bad_db.json").string();
  fs::remove(out);
  auto r = test::RunParallax("calibrate --import-nccl-tests " + bad + " -o " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(bad + ":4: expected 13 fields"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliCalibrate, MeasuringSaysItNeedsTheBackendSeam) {
  auto r = test::RunParallax("calibrate -o /dev/null");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("needs the typed backend seam"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace parallax
