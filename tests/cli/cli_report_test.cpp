// `parallax report`: one self-contained HTML page of a loop that ran (plan -> run under mpirun ->
// refine), checked as text and as headless Chromium renders it (scripts/run.sh writes the same page).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "model/load.h"
#include "run_command.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

//! The loop on a 2-rank local CPU cluster: plan gpt-tiny with an empty cost database, train it 3
//! steps under mpirun with a trace, refine from the trace, and report.
class CliReport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("parallax_report_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const std::string d = dir_.string();
    const std::string cluster = test::WriteTempFile(
        "report_cluster.json", R"({"kind":"cluster","version":1,"name":"local2","nodes":1,"gpus_per_node":2,)"
                               R"("device":"cpu","intra_node":{"bandwidth_GBps":5,"latency_us":1},)"
                               R"("inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})");
    const std::string db = test::WriteTempFile("report_db.json", R"({"kind":"costdb","version":1,"device":"cpu"})");
    auto plan = test::RunParallax("plan --model gpt-tiny --cluster " + cluster + " --global-batch 8 --precision fp32" +
                                  " --costdb " + db + " --top 3 --candidates " + d + "/candidates.json -o " + d +
                                  "/plan.json");
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    // Open MPI refuses root without these (CI containers run as root); other MPIs ignore them.
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    const std::string run = std::string(PARALLAX_MPIEXEC) + " --oversubscribe -np 2 " + PARALLAX_CLI +
                            " run --plan " + d + "/plan.json --steps 3 --trace " + d + "/measured.json > " + d +
                            "/run.log 2>&1";
    ASSERT_EQ(std::system(run.c_str()), 0) << Slurp(dir_ / "run.log");
    auto refine = test::RunParallax("refine --plan " + d + "/plan.json --trace " + d + "/measured.json --costdb " + db +
                                    " -o " + d + "/refined.json");
    ASSERT_EQ(refine.exit_code, 0) << refine.err;
    auto report = test::RunParallax("report --plan " + d + "/plan.json --measured " + d + "/measured.json --costdb " +
                                    db + " --refined-costdb " + d + "/refined.json --candidates " + d +
                                    "/candidates.json -o " + d + "/report.html");
    ASSERT_EQ(report.exit_code, 0) << report.err;
    auto p = ResolvePlan(d + "/plan.json", nullptr, nullptr, TrainingSpec{});
    ASSERT_TRUE(p) << p.error().message;
    layout_ = LayoutToString(p->layout);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static fs::path dir_;
  static std::string layout_;
};
fs::path CliReport::dir_;
std::string CliReport::layout_;

TEST_F(CliReport, NamesThePlanAndDrawsStepTimesAndOpErrorsInOneFile) {
  ASSERT_FALSE(HasFatalFailure());
  const std::string html = Slurp(dir_ / "report.html");
  EXPECT_NE(html.find("gpt-tiny on 2 x cpu (local2)"), std::string::npos);
  EXPECT_NE(html.find("<code>" + layout_ + "</code>"), std::string::npos) << layout_;
  EXPECT_NE(html.find("class=\"chosen\""), std::string::npos);
  EXPECT_GE(Count(html, "<tr"), 3u);  // header, the plan that ran, at least one other candidate
  EXPECT_EQ(Count(html, "<svg"), 2u);
  EXPECT_NE(html.find("predicted after refine"), std::string::npos);
  EXPECT_GE(Count(html, "<rect"), 7u);  // 3 step bars, and per op a bar before and after refine
  // Self-contained: nothing to fetch, nothing to run.
  for (const char* outside : {"http:", "https:", "src=", "<link", "<script", "@import", "url("}) {
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
  }
}

//! The path of `name` on PATH, or empty.
std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');) {
    const fs::path p = fs::path(dir) / name;
    if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

TEST_F(CliReport, RendersInHeadlessChromiumNamingThePlan) {
  ASSERT_FALSE(HasFatalFailure());
  const std::string chromium = OnPath("chromium");
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  // A fresh profile, no network services: the page must render from the file alone.
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
      " --disable-component-update --disable-sync --user-data-dir=" + (dir_ / "profile").string() + " ";
  const std::string url = "file://" + (dir_ / "report.html").string();
  const fs::path dom = dir_ / "dom.html", png = dir_ / "report.png";
  const std::string dump = "timeout 120 " + chromium + flags + "--dump-dom " + url + " > " + dom.string() + " 2>" +
                           (dir_ / "chromium.log").string();
  ASSERT_EQ(std::system(dump.c_str()), 0) << Slurp(dir_ / "chromium.log");
  const std::string rendered = Slurp(dom);
  EXPECT_NE(rendered.find("parallax report"), std::string::npos);
  EXPECT_NE(rendered.find(layout_), std::string::npos) << layout_;
  EXPECT_NE(rendered.find("<svg"), std::string::npos);
  const std::string shot = "timeout 120 " + chromium + flags + "--window-size=1100,900 --screenshot=" + png.string() +
                           " " + url + " >/dev/null 2>>" + (dir_ / "chromium.log").string();
  ASSERT_EQ(std::system(shot.c_str()), 0) << Slurp(dir_ / "chromium.log");
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 20000u);  // text, a table and bars, not a blank page
}

TEST(CliReportInput, AMeasuredTraceWithoutTheOpIdentitiesExitsTwo) {
  const std::string cluster = test::WriteTempFile(
      "report_bad_cluster.json", R"({"kind":"cluster","version":1,"name":"local2","nodes":1,"gpus_per_node":2,)"
                                 R"("device":"cpu","intra_node":{"bandwidth_GBps":5,"latency_us":1},)"
                                 R"("inter_node":{"bandwidth_GBps":1.25,"latency_us":20}})");
  const std::string plan = test::WriteTempFile("report_bad_plan.json", "");
  auto p = test::RunParallax("plan --model gpt-tiny --cluster " + cluster + " --global-batch 8 -o " + plan);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string kineto = PARALLAX_TEST_DATA_DIR "/traces/kineto/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz";
  const std::string out = test::WriteTempFile("report_bad.html", "");
  auto r = test::RunParallax("report --plan " + plan + " --measured " + kineto + " -o " + out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no op matches the plan's predicted trace"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace parallax
