// How ranks share a node's CPUs (executor/host_threads.h): fair shares from affinity masks, the
// explicit counts that win over them, and the CPU backend applying the decision to its BLAS.
#include <gtest/gtest.h>

#include <ostream>

#include "executor/cpu/cpu_backend.h"
#include "executor/launch.h"
#include "executor/cpu/wait_policy.h"
#include "executor/host_threads.h"

namespace parallax::executor {
namespace {

std::vector<int> Cpus(int first, int count) {
  std::vector<int> c;
  c.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) c.push_back(first + i);
  return c;
}

struct ShareCase {
  const char* name;
  std::vector<HostCpuRecord> ranks;
  int me;
  int64_t threads;
  double share;
  bool oversubscribed;
};
void PrintTo(const ShareCase& c, std::ostream* os) { *os << c.name; }  // ctest lists the case by it

class ShareHostCpusTable : public ::testing::TestWithParam<ShareCase> {};

TEST_P(ShareHostCpusTable, FairShareOfTheRanksCpus) {
  const ShareCase& c = GetParam();
  const HostThreads t = ShareHostCpus(c.ranks, c.me, 0, "--threads");
  EXPECT_EQ(t.threads, c.threads);
  EXPECT_NEAR(t.cpu_share, c.share, 1e-12);
  EXPECT_EQ(t.oversubscribed, c.oversubscribed);
  EXPECT_EQ(t.source, "auto");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ShareHostCpusTable,
    ::testing::Values(
        // One process, whole 16-CPU node: every CPU.
        ShareCase{"alone", {{"n0", Cpus(0, 16)}}, 0, 16, 16, false},
        // Four unbound ranks on 16 CPUs: four each.
        ShareCase{"unbound_split", {{"n0", Cpus(0, 16)}, {"n0", Cpus(0, 16)}, {"n0", Cpus(0, 16)}, {"n0", Cpus(0, 16)}},
                  2, 4, 4, false},
        // Ranks bound to one core each: one thread, not oversubscribed.
        ShareCase{"bound_to_core", {{"n0", {0}}, {"n0", {1}}}, 1, 1, 1, false},
        // Four ranks on two CPUs (mpirun --oversubscribe on this VM): half a CPU each.
        ShareCase{"oversubscribed", {{"n0", Cpus(0, 2)}, {"n0", Cpus(0, 2)}, {"n0", Cpus(0, 2)}, {"n0", Cpus(0, 2)}},
                  0, 1, 0.5, true},
        // Two sockets of 8, two ranks bound to each socket: four each.
        ShareCase{"socket_binding",
                  {{"n0", Cpus(0, 8)}, {"n0", Cpus(0, 8)}, {"n0", Cpus(8, 8)}, {"n0", Cpus(8, 8)}}, 3, 4, 4, false},
        // Ranks on other hosts do not share this host's CPUs.
        ShareCase{"two_hosts", {{"n0", Cpus(0, 8)}, {"n1", Cpus(0, 8)}}, 1, 8, 8, false},
        // A crowded other host does not make this one oversubscribed.
        ShareCase{"crowded_elsewhere", {{"n0", Cpus(0, 4)}, {"n1", {0}}, {"n1", {0}}}, 0, 4, 4, false},
        // Uneven: a rank pinned to CPU 0 and one unbound over 0-2; the pinned one holds 0.5.
        ShareCase{"uneven", {{"n0", {0}}, {"n0", Cpus(0, 3)}}, 1, 2, 2.5, true}),
    [](const ::testing::TestParamInfo<ShareCase>& i) { return std::string(i.param.name); });

TEST(HostThreads, ExplicitCountWinsAndNamesItsSource) {
  const std::vector<HostCpuRecord> ranks = {{"n0", Cpus(0, 2)}, {"n0", Cpus(0, 2)}, {"n0", Cpus(0, 2)}};
  const HostThreads t = ShareHostCpus(ranks, 0, 3, "OPENBLAS_NUM_THREADS");
  EXPECT_EQ(t.threads, 3);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS");
  EXPECT_TRUE(t.oversubscribed);  // still reported: three ranks on two CPUs
}

// What calibrate's turns read (profiler/calibrate/calibrate.cpp TurnsOf): the CPUs the host's ranks
// hold between them, and each rank's place among its host's ranks.
TEST(HostThreads, NodeCpusAndPlaceAmongTheHostsRanks) {
  const std::vector<HostCpuRecord> ranks = {{"n0", Cpus(0, 2)}, {"n1", Cpus(0, 4)}, {"n0", Cpus(0, 2)},
                                            {"n0", Cpus(0, 2)}, {"n0", {2}}};
  const HostThreads third = ShareHostCpus(ranks, 3, 0, "--threads");
  EXPECT_EQ(third.ranks_on_node, 4);
  EXPECT_EQ(third.node_index, 2);  // ranks 0, 2, 3, 4 on n0
  EXPECT_EQ(third.node_cpus, 3);   // CPUs 0 and 1 of three ranks, and CPU 2 of rank 4
  EXPECT_TRUE(third.oversubscribed);
  const HostThreads other = ShareHostCpus(ranks, 1, 0, "--threads");
  EXPECT_EQ(other.node_index, 0);
  EXPECT_EQ(other.node_cpus, 4);
  EXPECT_FALSE(other.oversubscribed);
}

TEST(HostThreads, LocalRecordHasThisProcessCpus) {
  const HostCpuRecord r = LocalHostCpus();
  EXPECT_FALSE(r.host.empty());
  EXPECT_FALSE(r.cpus.empty());
  auto world = LocalCommunicator();
  auto t = PlanHostThreads(*world, 2);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->threads, 2);
  EXPECT_EQ(t->cpus, static_cast<int64_t>(r.cpus.size()));
  EXPECT_EQ(t->ranks_on_node, 1);
}

TEST(HostThreads, CpuBackendAppliesTheDecision) {
  CpuBackend be;
  HostThreads t;
  t.threads = 1;
  t.oversubscribed = true;
  be.UseHostThreads(t);
  EXPECT_EQ(be.IntraOpThreads(), 1);
  EXPECT_EQ(CurrentWaitPolicy().spin_polls, WaitPolicy::Oversubscribed().spin_polls);
  t.threads = 2;
  t.oversubscribed = false;
  be.UseHostThreads(t);
  EXPECT_EQ(be.IntraOpThreads(), 2);
  EXPECT_EQ(CurrentWaitPolicy().spin_polls, WaitPolicy::Dedicated().spin_polls);
}

}  // namespace
}  // namespace parallax::executor
