// The process's place in the job from launcher variables (executor/launch_env.h): precedence,
// Slurm's host lists, malformed values.
#include "executor/launch_env.h"

#include <gtest/gtest.h>

namespace parallax::executor {
namespace {

TEST(LaunchEnv, NoLauncherVariablesIsOneProcess) {
  auto e = ReadLaunchEnv({{"HOME", "/root"}});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->source, LaunchSource::kNone);
  EXPECT_EQ(e->rank, 0);
  EXPECT_EQ(e->world_size, 1);
}

TEST(LaunchEnv, TorchrunVariablesGiveRankSizeAndMaster) {
  auto e = ReadLaunchEnv({{"RANK", "3"},
                          {"WORLD_SIZE", "8"},
                          {"LOCAL_RANK", "1"},
                          {"MASTER_ADDR", "node-a"},
                          {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->source, LaunchSource::kTorchrun);
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->master_addr, "node-a");
  EXPECT_EQ(e->master_port, 29500);
}

TEST(LaunchEnv, OpenMpiVariablesWinOverTorchrunAndSlurm) {
  auto e = ReadLaunchEnv({{"OMPI_COMM_WORLD_RANK", "2"},
                          {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                          {"RANK", "7"},
                          {"WORLD_SIZE", "16"},
                          {"SLURM_PROCID", "5"},
                          {"SLURM_NTASKS", "6"}});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->source, LaunchSource::kMpi);
  EXPECT_EQ(e->rank, 2);
  EXPECT_EQ(e->world_size, 4);
}

TEST(LaunchEnv, PmixRankCountsAsMpiWithSlurmsTaskCount) {
  auto e = ReadLaunchEnv({{"PMIX_RANK", "1"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->source, LaunchSource::kMpi);
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 4);
}

TEST(LaunchEnv, TorchrunWinsOverSlurmInsideAnAllocation) {
  auto e = ReadLaunchEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->source, LaunchSource::kTorchrun);
  EXPECT_EQ(e->world_size, 2);
}

TEST(LaunchEnv, SlurmWithoutMasterAddrRendezvousesOnTheFirstHostOfTheNodeList) {
  auto e = ReadLaunchEnv({{"SLURM_PROCID", "5"},
                          {"SLURM_NTASKS", "16"},
                          {"SLURM_LOCALID", "1"},
                          {"SLURM_JOB_NODELIST", "gpu[01-04,07],login1"},
                          {"MASTER_PORT", "29400"}});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->source, LaunchSource::kSlurm);
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 16);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->master_addr, "gpu01");
  EXPECT_EQ(e->master_port, 29400);
}

TEST(LaunchEnv, SlurmWithoutMasterPortDerivesOneFromTheJobId) {
  auto e = ReadLaunchEnv({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "123456"},
                          {"SLURM_JOB_NODELIST", "n[7-8]"}});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->master_addr, "n7");
  EXPECT_EQ(e->master_port, 20000 + 123456 % 20000);
}

TEST(LaunchEnv, SlurmKeepsAnExplicitMasterAddr) {
  auto e = ReadLaunchEnv({{"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "2"},
                          {"SLURM_JOB_NODELIST", "gpu[01-02]"},
                          {"MASTER_ADDR", "10.0.0.9"}});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->master_addr, "10.0.0.9");
}

TEST(LaunchEnv, MalformedValuesAreBadInputNamingTheVariable) {
  struct Case {
    EnvMap env;
    const char* names;
  };
  const Case cases[] = {
      {{{"RANK", "one"}, {"WORLD_SIZE", "2"}}, "RANK=one"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0"},
      {{{"RANK", "0"}}, "WORLD_SIZE is not set"},
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK=4, WORLD_SIZE=4"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT=70000"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "gpu[01-"}}, "SLURM_JOB_NODELIST"},
      {{{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, "OMPI_COMM_WORLD_RANK=-1"},
  };
  for (const Case& c : cases) {
    auto e = ReadLaunchEnv(c.env);
    ASSERT_FALSE(e) << c.names;
    EXPECT_EQ(e.error().kind, ErrorKind::kBadInput);
    EXPECT_NE(e.error().message.find(c.names), std::string::npos) << e.error().message;
  }
}

TEST(SlurmHostList, ExpandsRangesListsPaddingAndSuffixes) {
  struct Case {
    const char* list;
    std::vector<std::string> hosts;
  };
  const Case cases[] = {
      {"node1", {"node1"}},
      {"gpu[01-04,07],login1", {"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"}},
      {"a[8-11]", {"a8", "a9", "a10", "a11"}},
      {"rack1-n[098-101]", {"rack1-n098", "rack1-n099", "rack1-n100", "rack1-n101"}},
      {"c[1,3]-ib,d2", {"c1-ib", "c3-ib", "d2"}},
      {"x1000c0s[0-1]b0n0", {"x1000c0s0b0n0", "x1000c0s1b0n0"}},
      {"", {}},
  };
  for (const Case& c : cases) {
    auto h = ExpandSlurmHostList(c.list);
    ASSERT_TRUE(h) << c.list << ": " << h.error().message;
    EXPECT_EQ(*h, c.hosts) << c.list;
  }
}

TEST(SlurmHostList, MalformedListsAreErrorsQuotingTheList) {
  for (const char* bad : {"gpu[01-", "gpu01]", "gpu[04-01]", "gpu[a-b]", "gpu[1],,x", "g[1][2]", "gpu[]"}) {
    auto h = ExpandSlurmHostList(bad);
    ASSERT_FALSE(h) << bad;
    EXPECT_NE(h.error().message.find(bad), std::string::npos) << h.error().message;
  }
}

}  // namespace
}  // namespace parallax::executor
