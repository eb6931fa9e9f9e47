// nccl-tests import on the real outputs in tests/data/nccl-tests/.
// Expected values come from tests/profiler/derive_nccl_golden.sh, an awk computation independent
// of the C++ parser (rank lines, hosts, rows of size > 0, the largest size's times and busbw by
// nccl-tests' definitions); its output is quoted beside each case.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>

#include "model/cluster_spec.h"
#include "planner/cost/collective.h"
#include "planner/cost/placement.h"
#include "profiler/nccl_tests/import.h"
#include "profiler/nccl_tests/output_parser.h"

namespace parallax::profiler {
namespace {

std::string Shared(const std::string& name) { return std::string(PARALLAX_TEST_DATA_DIR) + "/nccl-tests/" + name; }

struct Golden {
  const char* file;
  CollectiveKind op;
  int64_t ranks;
  bool spans_nodes;
  const char* device;
  size_t rows;  // points per curve (rows of size > 0)
  int64_t first_bytes, last_bytes;
  double last_oop_time_us, last_ip_time_us;
  double last_busbw_oop, last_busbw_ip;  // awk: size / time_us / 1e3 x factor(n)
};
void PrintTo(const Golden& g, std::ostream* os) { *os << g.file; }  // ctest lists the case by it

class NcclTestsGolden : public ::testing::TestWithParam<Golden> {};

const CollectiveCurve& CurveWith(const NcclTestsImport& imp, const std::string& placement) {
  for (const auto& c : imp.curves) {
    if (c.placement == placement) return c;
  }
  throw std::runtime_error("no " + placement + " curve");
}

TEST_P(NcclTestsGolden, CurvesMatchTheAwkDerivation) {
  const Golden g = GetParam();
  auto out = ReadNcclTestsFile(Shared(g.file));
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->op, g.op);
  EXPECT_EQ(out->group_size(), g.ranks);
  EXPECT_EQ(out->spans_nodes(), g.spans_nodes);
  auto imp = ImportNcclTests(*out);
  ASSERT_TRUE(imp) << imp.error().message;
  EXPECT_EQ(imp->device, g.device);
  ASSERT_EQ(imp->curves.size(), 2u);
  // The placement the frameworks use comes first (in-place all-reduce, out-of-place otherwise).
  EXPECT_EQ(imp->curves.front().placement, g.op == CollectiveKind::kAllReduce ? "in-place" : "out-of-place");
  EXPECT_TRUE(imp->skipped.empty());
  for (const char* placement : {"out-of-place", "in-place"}) {
    const CollectiveCurve& c = CurveWith(*imp, placement);
    const bool ip = std::string(placement) == "in-place";
    EXPECT_EQ(c.op, g.op);
    EXPECT_EQ(c.group_size, g.ranks);
    EXPECT_EQ(c.spans_nodes, g.spans_nodes);
    EXPECT_EQ(c.source, "nccl-tests");
    EXPECT_EQ(c.origin, g.file);
    ASSERT_EQ(c.points.size(), g.rows) << placement;
    EXPECT_EQ(c.points.front().bytes, g.first_bytes);
    EXPECT_EQ(c.points.back().bytes, g.last_bytes);
    EXPECT_NEAR(c.points.back().time_s * 1e6, ip ? g.last_ip_time_us : g.last_oop_time_us, 1e-6);
    EXPECT_NEAR(c.points.back().busbw_GBps, ip ? g.last_busbw_ip : g.last_busbw_oop, 1e-4) << placement;
  }
}

// awk output (tests/profiler/derive_nccl_golden.sh tests/data/nccl-tests/*.txt):
//   a100_1node8_all_gather_perf_superbench.txt ranks=8 hosts=1 rows=29 first=32 last=8589934592 oop_time_us=33646 ip_time_us=32669 busbw_oop=223.3904 busbw_ip=230.0711
//   a100_1node8_all_reduce_perf_superbench.txt ranks=8 hosts=1 rows=32 first=4 last=8589934592 oop_time_us=63896 ip_time_us=63959 busbw_oop=235.2633 busbw_ip=235.0316
//   a100_1node8_alltoall_perf_superbench.txt ranks=8 hosts=1 rows=29 first=32 last=8589934592 oop_time_us=33508 ip_time_us=33234 busbw_oop=224.3104 busbw_ip=226.1597
//   a100_1node8_reduce_scatter_perf_superbench.txt ranks=8 hosts=1 rows=29 first=32 last=8589934592 oop_time_us=32464 ip_time_us=32502 busbw_oop=231.5239 busbw_ip=231.2532
//   a100_2node16_all_reduce_perf_oci-hpc-oke.txt ranks=16 hosts=2 rows=31 first=8 last=8589934592 oop_time_us=67689 ip_time_us=67811 busbw_oop=237.9431 busbw_ip=237.5150
//   h100_1node8_all_reduce_perf_nccl-tests-issue290.txt ranks=8 hosts=1 rows=6 first=134217728 last=4294967296 oop_time_us=15870 ip_time_us=15773 busbw_oop=473.6101 busbw_ip=476.5227
//   h100_2node16_all_reduce_perf_gcp-a3mega.txt ranks=16 hosts=2 rows=31 first=8 last=8589934592 oop_time_us=47535 ip_time_us=47743 busbw_oop=338.8267 busbw_ip=337.3506
INSTANTIATE_TEST_SUITE_P(
    Shared, NcclTestsGolden,
    ::testing::Values(
        Golden{"a100_1node8_all_gather_perf_superbench.txt", CollectiveKind::kAllGather, 8, false, "a100-sxm-40g", 29,
               32, 8589934592, 33646, 32669, 223.3904, 230.0711},
        Golden{"a100_1node8_all_reduce_perf_superbench.txt", CollectiveKind::kAllReduce, 8, false, "a100-sxm-40g", 32,
               4, 8589934592, 63896, 63959, 235.2633, 235.0316},
        Golden{"a100_1node8_alltoall_perf_superbench.txt", CollectiveKind::kAllToAll, 8, false, "a100-sxm-40g", 29, 32,
               8589934592, 33508, 33234, 224.3104, 226.1597},
        Golden{"a100_1node8_reduce_scatter_perf_superbench.txt", CollectiveKind::kReduceScatter, 8, false,
               "a100-sxm-40g", 29, 32, 8589934592, 32464, 32502, 231.5239, 231.2532},
        Golden{"a100_2node16_all_reduce_perf_oci-hpc-oke.txt", CollectiveKind::kAllReduce, 16, true, "a100-sxm-40g", 31,
               8, 8589934592, 67689, 67811, 237.9431, 237.5150},
        Golden{"h100_1node8_all_reduce_perf_nccl-tests-issue290.txt", CollectiveKind::kAllReduce, 8, false,
               "h100-sxm-80g", 6, 134217728, 4294967296, 15870, 15773, 473.6101, 476.5227},
        Golden{"h100_2node16_all_reduce_perf_gcp-a3mega.txt", CollectiveKind::kAllReduce, 16, true, "h100-sxm-80g", 31,
               8, 8589934592, 47535, 47743, 338.8267, 337.3506}),
    [](const ::testing::TestParamInfo<Golden>& param_info) {
      std::string n = param_info.param.file;
      n = n.substr(0, n.find(".txt"));
      for (char& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

// Every row: our algbw/busbw from the time agree with the figures nccl-tests printed (which are
// rounded to 0.01 GB/s and computed from the unrounded time).
TEST(NcclTestsImport, EveryPointAgreesWithThePrintedBandwidths) {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(PARALLAX_TEST_DATA_DIR) + "/nccl-tests")) {
    if (entry.path().extension() != ".txt") continue;
    auto out = ReadNcclTestsFile(entry.path().string());
    ASSERT_TRUE(out) << out.error().message;
    const double f = planner::CollectiveModel::BusFactor(out->op, out->group_size());
    int64_t checked = 0;
    for (const auto& row : out->rows) {
      if (row.bytes == 0) continue;
      for (const NcclTestsColumn* col : {&row.out_of_place, &row.in_place}) {
        const double algbw = static_cast<double>(row.bytes) / (col->time_us * 1e-6) / 1e9;
        // Printed time has 4-5 significant digits: 0.2% relative plus the 0.005 rounding.
        EXPECT_NEAR(algbw, col->algbw_GBps, 0.006 + 2e-3 * algbw) << entry.path() << ":" << row.line;
        EXPECT_NEAR(algbw * f, col->busbw_GBps, 0.006 + 2e-3 * algbw * f) << entry.path() << ":" << row.line;
        ++checked;
      }
    }
    EXPECT_GT(checked, 10) << entry.path();
  }
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("parallax_nccl_" + name);
  std::ofstream(path) << text;
  return path.string();
}

const char* kHeader =
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
    "validation: 1 graph: 0\n"
    "#\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid     43 on node-a device  0 [0x0f] NVIDIA A100-SXM4-80GB\n"
    "#  Rank  1 Group  0 Pid     44 on node-b device  0 [0x0f] NVIDIA A100-SXM4-80GB\n"
    "#\n"
    "#                                                              out-of-place                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
    "#wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n";

TEST(NcclTestsImport, WrongResultsAreSkippedWithTheirLine) {
  const std::string f = WriteTemp("all_reduce_perf_wrong.txt",
                                  std::string(kHeader) +
                                      "           8             2     float     sum      -1    36.47    0.00    0.00  "
                                      "    0    34.74    0.00    0.00      3\n"
                                      "          16             4     float     sum      -1    38.86    0.00    0.00  "
                                      "    0    35.65    0.00    0.00      0\n");
  CostDb db;
  ASSERT_TRUE(ImportNcclTestsFiles({f}, db));
  EXPECT_EQ(db.device, "a100-sxm-80g");
  ASSERT_EQ(db.collectives.size(), 2u);
  EXPECT_TRUE(db.collectives[0].spans_nodes);
  EXPECT_EQ(db.collectives[0].placement, "in-place");
  EXPECT_EQ(db.collectives[0].points.size(), 1u);  // the 8 B in-place row was wrong
  EXPECT_EQ(db.collectives[1].points.size(), 2u);
  ASSERT_EQ(db.skipped.size(), 1u);
  EXPECT_EQ(db.skipped[0].what, "all_reduce 2 ranks 8 B in-place (parallax_nccl_all_reduce_perf_wrong.txt:10)");
  EXPECT_EQ(db.skipped[0].reason, "nccl-tests counted 3 wrong results");
}

// An import prices its collective from then on: calibrate's curve of the same collective, group
// size and node span goes (calibrate measured our communicator; the import, the user's library),
// the others stay, and the planner's curve for that group is the imported one.
TEST(NcclTestsImport, AnImportedCurveReplacesTheDatabasesCurveOfTheSameCollective) {
  const std::string f = WriteTemp("all_reduce_perf_replaces.txt",
                                  std::string(kHeader) +
                                      "     1048576        262144     float     sum      -1   500.00    2.10    2.10  "
                                      "    0   400.00    2.62    2.62      0\n");
  CostDb db;
  db.device = "a100-sxm-80g";
  auto calibrated = [](CollectiveKind op, bool spans) {
    CollectiveCurve c;
    c.op = op;
    c.group_size = 2;
    c.spans_nodes = spans;
    c.source = "calibrate";
    c.points = {{.bytes = 1 << 20, .time_s = 100e-6}};
    return c;
  };
  db.collectives = {calibrated(CollectiveKind::kAllReduce, true), calibrated(CollectiveKind::kAllReduce, false),
                    calibrated(CollectiveKind::kAllGather, true)};
  std::vector<CollectiveCurve> replaced;
  ASSERT_TRUE(ImportNcclTestsFiles({f}, db, "", &replaced));
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_EQ(replaced[0].op, CollectiveKind::kAllReduce);
  EXPECT_TRUE(replaced[0].spans_nodes);
  ASSERT_EQ(db.collectives.size(), 4u);  // the one-node all-reduce, the all-gather, the two imported
  EXPECT_FALSE(db.collectives[0].spans_nodes);
  EXPECT_EQ(db.collectives[1].op, CollectiveKind::kAllGather);
  EXPECT_EQ(db.collectives[2].source, "nccl-tests");
  EXPECT_EQ(db.collectives[2].placement, "in-place");
  ClusterSpec cluster;
  cluster.nodes = 2;
  cluster.gpus_per_node = 1;
  const planner::CollectiveModel model(cluster, &db);
  const planner::PlacedGroup two_nodes{.size = 2, .ranks_per_node = 1, .nodes = 2, .gpus_per_node = 1};
  EXPECT_NEAR(model.Time(CollectiveKind::kAllReduce, 1 << 20, two_nodes), 400e-6, 1e-9);  // imported, in-place
  // A second import of the same collective replaces the first one's curves.
  replaced.clear();
  ASSERT_TRUE(ImportNcclTestsFiles({f}, db, "", &replaced));
  EXPECT_EQ(replaced.size(), 2u);
  EXPECT_EQ(db.collectives.size(), 4u);
}

struct Malformed {
  const char* name;
  std::string body;      // appended to kHeader unless `whole`
  bool whole;
  std::string expected;  // message after "<path>"
};

TEST(NcclTestsImport, MalformedFilesNameFileAndLine) {
  const std::string row = "           8             2     float     sum      -1    36.47    0.00    0.00      0    34.74"
                          "    0.00    0.00      0\n";
  const std::vector<Malformed> cases = {
      {"all_reduce_perf_short.txt", "           8             2     float     sum      -1    36.47    0.00\n", false,
       ":10: expected 13 fields as the column header names, got 7"},
      {"all_reduce_perf_nan.txt",
       "           8             2     float     sum      -1    fast    0.00    0.00      0    34.74    0.00    0.00      0\n",
       false, ":10: time, algbw and busbw must be numbers (got \"fast\", \"0.00\", \"0.00\")"},
      {"all_reduce_perf_junk.txt", row + "Segmentation fault (core dumped)\n", false,
       ":11: expected 13 fields as the column header names, got 4"},
      {"all_reduce_perf_norank.txt",
       "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
       "#wrong\n" + row,
       true, ": no \"# Using devices\" rank lines: the group size is unknown"},
      {"some_output.txt", row, false,
       ": cannot tell which nccl-tests program wrote it (no \"# Collective test starting:\" line and no program name "
       "such as all_reduce_perf in the file name)"},
      {"all_reduce_perf_empty.txt", "", false, ": no data rows"},
      {"all_reduce_perf_twice.txt",
       row + "          16             4     float     sum      -1    36.47    0.00    0.00      0    34.74    0.00    0.00      0\n" +
           row,
       false,
       ":12: size 8 B does not rise above the previous row's 16 B: a file holds one run of rising sizes (two runs "
       "pasted together? import them as separate files)"},
      {"all_reduce_perf_dall.txt",
       row + "           8             8      int8     sum      -1    36.47    0.00    0.00      0    34.74    0.00    0.00      0\n",
       false,
       ":11: data type / reduction \"int8 sum\" after \"float sum\": a file holds one curve (run nccl-tests with one -d "
       "and -o, or split the file)"},
  };
  for (const auto& c : cases) {
    const std::string f = WriteTemp(c.name, c.whole ? c.body : std::string(kHeader) + c.body);
    CostDb db;
    Status s = ImportNcclTestsFiles({f}, db);
    ASSERT_FALSE(s) << c.name;
    EXPECT_EQ(s.error().kind, ErrorKind::kBadInput);
    EXPECT_EQ(s.error().message, f + c.expected) << c.name;
  }
}

TEST(NcclTestsImport, ProgramLineWinsOverTheFileName) {
  const std::string f = WriteTemp("all_reduce_perf_named.txt",
                                  "# Collective test starting: all_gather_perf\n" + std::string(kHeader) +
                                      "          16             2     float    none      -1    36.47    0.00    0.00  "
                                      "    0    34.74    0.00    0.00      0\n");
  auto out = ReadNcclTestsFile(f);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->program, "all_gather_perf");
  EXPECT_EQ(out->op, CollectiveKind::kAllGather);
}

TEST(NcclTestsImport, FilesOfDifferentDevicesDoNotMix) {
  CostDb db;
  Status s = ImportNcclTestsFiles({Shared("a100_1node8_all_reduce_perf_superbench.txt"),
                                   Shared("h100_2node16_all_reduce_perf_gcp-a3mega.txt")},
                                  db);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, Shared("h100_2node16_all_reduce_perf_gcp-a3mega.txt") +
                                   ": measured on \"h100-sxm-80g\" but the cost database is for \"a100-sxm-40g\" "
                                   "(import each device's outputs into its own database)");
}

}  // namespace
}  // namespace parallax::profiler
