// Trace statistics: hand-computed breakdowns on small traces, and the per-rank compute /
// communication / idle / overlap numbers of the real Kineto traces (derived independently by
// derive_golden.py with interval unions in Python).
#include <gtest/gtest.h>

#include "traces/chrome_reader.h"
#include "traces/stats.h"
#include "traces/tracer.h"

namespace parallax::traces {
namespace {

TEST(Stats, PercentileIsNearestRank) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 50), 50);
  EXPECT_EQ(Percentile(v, 99), 99);
  EXPECT_EQ(Percentile(v, 100), 100);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_EQ(Percentile({}, 50), 0);
}

TEST(Stats, RankBreakdownAndOverlapByHand) {
  Tracer tr("predicted");
  const TrackId c0 = tr.Track(0, Stream::kCompute);
  const TrackId dp0 = tr.Track(0, Stream::kDpComm);
  const TrackId h0 = tr.Track(0, Stream::kHost);
  const TrackId c1 = tr.Track(1, Stream::kCompute);
  const StringId gemm = tr.Intern("gemm");
  const StringId ar = tr.Intern("allreduce");
  tr.Record(c0, gemm, 0, 100);
  tr.Record(c0, gemm, 150, 100);
  tr.Record(c0, tr.Intern("inner"), 10, 20);  // nested: does not add busy time
  tr.Record(dp0, ar, 80, 120);
  tr.Record(h0, tr.Intern("python"), 0, 1000);  // host time is not device time
  tr.Record(c1, gemm, 0, 10);
  tr.Record(c1, gemm, 90, 10);  // 80 ns idle in between
  const TraceStats st = ComputeStats(tr.trace());
  EXPECT_EQ(st.slices, 7);
  ASSERT_EQ(st.per_rank.size(), 2u);
  const RankBreakdown& r0 = st.per_rank[0];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r0.span_ns, 250);
  EXPECT_EQ(r0.compute_ns, 200);
  EXPECT_EQ(r0.comm_ns, 120);
  EXPECT_EQ(r0.overlap_ns, 70);  // [80,100) + [150,200)
  EXPECT_DOUBLE_EQ(r0.overlap_ratio, 70.0 / 120.0);
  EXPECT_EQ(r0.idle_ns, 0);
  const RankBreakdown& r1 = st.per_rank[1];
  EXPECT_EQ(r1.span_ns, 100);
  EXPECT_EQ(r1.compute_ns, 20);
  EXPECT_EQ(r1.idle_ns, 80);
  EXPECT_EQ(r1.comm_ns, 0);
  EXPECT_EQ(r1.overlap_ratio, 0);
  // Per track busy time is the union of its slices.
  EXPECT_EQ(st.tracks[c0].busy_ns, 200);
  EXPECT_EQ(st.tracks[c0].slices, 3);
  EXPECT_EQ(st.tracks[h0].busy_ns, 1000);
  // Categories default to the stream names.
  EXPECT_EQ(st.categories.at("compute").count, 5);
  EXPECT_EQ(st.categories.at("compute").total_ns, 240);
  EXPECT_EQ(st.categories.at("dp-comm").total_ns, 120);
  // Names: gemm has 4 slices of 100, 100, 10, 10.
  ASSERT_FALSE(st.names.empty());
  EXPECT_EQ(st.names[0].name, "python");
  const auto gemm_stats = std::find_if(st.names.begin(), st.names.end(), [](const NameStats& n) { return n.name == "gemm"; });
  ASSERT_NE(gemm_stats, st.names.end());
  EXPECT_EQ(gemm_stats->count, 4);
  EXPECT_EQ(gemm_stats->total_ns, 220);
  EXPECT_EQ(gemm_stats->mean_ns, 55);
  EXPECT_EQ(gemm_stats->p50_ns, 10);
  EXPECT_EQ(gemm_stats->p99_ns, 100);

  const Json j = StatsToJson(st);
  EXPECT_EQ(j["slices"], 7);
  EXPECT_EQ(j["tracks"].size(), 4u);
  EXPECT_EQ(j["categories"]["dp-comm"]["count"], 1);
  EXPECT_EQ(j["per_rank"][0]["comm_ns"], 120);
  EXPECT_EQ(j["per_rank"][1]["idle_ns"], 80);
  EXPECT_EQ(j["names"][0]["name"], "python");
  EXPECT_NE(FormatStats(st).find("Per rank"), std::string::npos);
}

TEST(Stats, TopNamesIsLimited) {
  Tracer tr;
  const TrackId c = tr.Track(0, Stream::kCompute);
  for (int i = 0; i < 50; ++i) tr.Record(c, tr.Intern("op" + std::to_string(i)), int64_t{i} * 100, i + 1);
  StatsOptions o;
  o.top_names = 5;
  const TraceStats st = ComputeStats(tr.trace(), o);
  EXPECT_EQ(st.distinct_names, 50);
  ASSERT_EQ(st.names.size(), 5u);
  EXPECT_EQ(st.names[0].name, "op49");
  EXPECT_EQ(st.names[4].name, "op45");
}

struct KinetoCase {
  const char* file;
  int64_t rank, compute_ns, comm_ns, idle_ns, overlap_ns;
};

TEST(Stats, KinetoPerRankBreakdownMatchesIndependentDerivation) {
  const KinetoCase cases[] = {
      {"nccl_parser_config__nccl_data.json.gz", 0, 115655847, 46876493, 503050991, 7317025},
      {"trace_diff__control__control.json.gz", 3, 281336000, 163535000, 76007000, 75614000},
  };
  for (const KinetoCase& c : cases) {
    auto t = ReadChromeTrace(PARALLAX_TEST_DATA_DIR "/traces/kineto/" + std::string(c.file));
    ASSERT_TRUE(t.ok()) << t.error().message;
    const TraceStats st = ComputeStats(*t);
    ASSERT_EQ(st.per_rank.size(), 1u) << c.file;
    const RankBreakdown& r = st.per_rank[0];
    EXPECT_EQ(r.rank, c.rank) << c.file;
    EXPECT_EQ(r.compute_ns, c.compute_ns) << c.file;
    EXPECT_EQ(r.comm_ns, c.comm_ns) << c.file;
    EXPECT_EQ(r.idle_ns, c.idle_ns) << c.file;
    EXPECT_EQ(r.overlap_ns, c.overlap_ns) << c.file;
    EXPECT_NEAR(r.overlap_ratio, static_cast<double>(c.overlap_ns) / static_cast<double>(c.comm_ns), 1e-12);
  }
}

TEST(Stats, CpuOnlyKinetoTraceHasNoDeviceBreakdown) {
  auto t = ReadChromeTrace(PARALLAX_TEST_DATA_DIR "/traces/kineto/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
  ASSERT_TRUE(t.ok()) << t.error().message;
  const TraceStats st = ComputeStats(*t);
  EXPECT_TRUE(st.per_rank.empty());
  EXPECT_EQ(st.slices, 16);
  EXPECT_EQ(st.instants, 2);
  EXPECT_EQ(st.categories.at("user_annotation").count, 11);
}

}  // namespace
}  // namespace parallax::traces
