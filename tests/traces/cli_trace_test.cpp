// `parallax trace stats|diff|convert` in process: exit status, --json contract, bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/tracer.h"

namespace parallax::cli {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int rc = 0;
  std::string out;
};

CliRun Parallax(std::vector<std::string> args) {
  CLI::App app{"parallax"};
  app.require_subcommand(1);
  CliState state;
  RegisterTraceCommand(app, state);
  args.insert(args.begin(), "parallax");
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream captured;
  std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
  CliRun r;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    r.rc = state.exit_code;
  } catch (const CLI::ParseError& e) {
    r.rc = app.exit(e) == 0 ? 0 : 2;
  }
  std::cout.rdbuf(old);
  r.out = captured.str();
  return r;
}

const std::string kKineto = PARALLAX_TEST_DATA_DIR "/traces/kineto/";

fs::path Tmp(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("parallax_cli_trace_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}

TEST(CliTrace, StatsJsonOnKinetoTrace) {
  const CliRun r = Parallax({"trace", "stats", kKineto + "trace_diff__control__control.json.gz", "--json", "--top", "3"});
  ASSERT_EQ(r.rc, 0) << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["slices"], 74937);
  EXPECT_EQ(j["tracks"].size(), 10u);
  EXPECT_EQ(j["categories"]["kernel"]["count"], 8568);
  EXPECT_EQ(j["names"].size(), 3u);
  ASSERT_EQ(j["per_rank"].size(), 1u);
  EXPECT_EQ(j["per_rank"][0]["rank"], 3);
  EXPECT_EQ(j["per_rank"][0]["comm_ns"], 163535000);
  EXPECT_TRUE(j["per_rank"][0].contains("overlap_ratio"));
}

TEST(CliTrace, StatsTextMentionsTables) {
  const CliRun r = Parallax({"trace", "stats", kKineto + "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("Top names by total time"), std::string::npos);
  EXPECT_NE(r.out.find("gloo:all_reduce"), std::string::npos);
}

TEST(CliTrace, BadInputExitsTwoWithJsonError) {
  const fs::path bad = Tmp("bad.json");
  std::ofstream(bad) << R"({"traceEvents":[{"ph":"X","ts":1,"dur":-1}]})";
  const CliRun r = Parallax({"trace", "stats", bad.string(), "--json"});
  EXPECT_EQ(r.rc, 2);
  const Json j = Json::parse(r.out);
  EXPECT_NE(j["error"].get<std::string>().find("event 0"), std::string::npos);
  EXPECT_NE(j["error"].get<std::string>().find("negative duration"), std::string::npos);
  EXPECT_EQ(Parallax({"trace", "stats", "/nonexistent.json"}).rc, 2);
  EXPECT_EQ(Parallax({"trace", "stats"}).rc, 2);
  EXPECT_EQ(Parallax({"trace", "frobnicate"}).rc, 2);
}

TEST(CliTrace, LenientLoadsTruncatedFile) {
  std::string text;
  {
    traces::Tracer tr("measured");
    const auto c = tr.Track(0, traces::Stream::kCompute);
    for (int i = 0; i < 100; ++i) tr.Record(c, tr.Intern("op"), int64_t{i} * 10, 5);
    auto sink = traces::StringSink(&text);
    ASSERT_TRUE(traces::WriteChromeTrace(tr.trace(), *sink).ok());
  }
  const fs::path cut = Tmp("cut.json");
  std::ofstream(cut) << text.substr(0, text.size() / 2);
  EXPECT_EQ(Parallax({"trace", "stats", cut.string()}).rc, 2);
  const CliRun r = Parallax({"trace", "stats", cut.string(), "--lenient", "--json"});
  ASSERT_EQ(r.rc, 0);
  const Json j = Json::parse(r.out);
  EXPECT_GT(j["slices"].get<int>(), 10);
  EXPECT_LT(j["slices"].get<int>(), 100);
  EXPECT_EQ(j["warnings"].size(), 1u);
}

TEST(CliTrace, ConvertKinetoToParallaxLayoutAndGzipRoundTrip) {
  const fs::path gz = Tmp("converted.json.gz");
  const CliRun r = Parallax({"trace", "convert", kKineto + "nccl_parser_config__nccl_data.json.gz", gz.string(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(Json::parse(r.out)["layout"], "parallax");
  auto t = traces::ReadChromeTrace(gz.string());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->slices().size(), 26935u);
  EXPECT_EQ(t->flows().size(), 4317u);
  // Device streams now live under pid = rank 0 with stream-kind thread names.
  int device_tracks = 0;
  for (const auto& tr : t->tracks()) {
    if (tr.device) {
      ++device_tracks;
      EXPECT_EQ(tr.pid, 0);
      EXPECT_EQ(tr.rank, 0);
    }
  }
  EXPECT_EQ(device_tracks, 2);
  // gz -> plain JSON keeps everything.
  const fs::path plain = Tmp("converted.json");
  ASSERT_EQ(Parallax({"trace", "convert", gz.string(), plain.string()}).rc, 0);
  auto p = traces::ReadChromeTrace(plain.string());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->slices().size(), 26935u);
  std::ifstream in(plain, std::ios::binary);
  EXPECT_EQ(in.get(), '{');  // not gzip
}

TEST(CliTrace, DiffJson) {
  traces::Tracer a("predicted"), b("measured");
  for (auto* tr : {&a, &b}) {
    const auto c = tr->Track(0, traces::Stream::kCompute);
    OpIdentity id;
    id.op = OpKind::kFc1;
    tr->Record(c, tr->OpName(OpKind::kFc1), 0, tr == &a ? 100 : 125, id);
  }
  const fs::path pa = Tmp("p.json"), pb = Tmp("m.json.gz");
  ASSERT_TRUE(traces::WriteChromeTrace(a.trace(), pa.string()).ok());
  ASSERT_TRUE(traces::WriteChromeTrace(b.trace(), pb.string()).ok());
  const CliRun r = Parallax({"trace", "diff", pa.string(), pb.string(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["alignment"], "identity");
  EXPECT_EQ(j["matched"], 1);
  EXPECT_DOUBLE_EQ(j["per_op"][0]["rel_error"].get<double>(), -0.2);
  EXPECT_DOUBLE_EQ(j["step_time"]["rel_error"].get<double>(), -0.2);
  EXPECT_EQ(j["step_time"]["measured_steps"], Json::array({0}));
  // --step names a measured step; one the trace lacks is bad input naming the file.
  const CliRun ok = Parallax({"trace", "diff", pa.string(), pb.string(), "--json", "--step", "0"});
  EXPECT_EQ(ok.rc, 0) << ok.out;
  const CliRun bad = Parallax({"trace", "diff", pa.string(), pb.string(), "--json", "--step", "3"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("--step 3: no such step (the trace has 0)"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("m.json.gz"), std::string::npos) << bad.out;
}

// A PyTorch profiler trace names kernels and aten ops: diffed as it is against a prediction,
// nothing pairs, and the diff says how to lay it onto the plan's ops rather than compare spans
// silently.
TEST(CliTrace, DiffOfAForeignTraceThatMatchesNothingSaysToAttributeItFirst) {
  traces::Tracer a("predicted");
  OpIdentity id;
  id.op = OpKind::kFc1;
  a.Record(a.Track(0, traces::Stream::kCompute), a.OpName(OpKind::kFc1), 0, 100, id);
  const fs::path pa = Tmp("p_foreign.json");
  ASSERT_TRUE(traces::WriteChromeTrace(a.trace(), pa.string()).ok());
  const std::string measured = kKineto + "trace_file_list__inference_rank_1.json.gz";
  const CliRun r = Parallax({"trace", "diff", pa.string(), measured, "--json"});
  ASSERT_EQ(r.rc, 0) << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["matched"], 0);
  ASSERT_EQ(j["warnings"].size(), 1u) << j["warnings"].dump();
  EXPECT_NE(
      j["warnings"][0].get<std::string>().find(measured + ": no slice matched a predicted op"),
      std::string::npos);
  EXPECT_NE(j["warnings"][0].get<std::string>().find("--attributed-trace"), std::string::npos);
}

}  // namespace
}  // namespace parallax::cli
