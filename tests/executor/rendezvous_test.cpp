// The TCP rendezvous (executor/rendezvous.h) across real processes without MPI: each rank is a
// forked child that reads its place from torchrun-style variables (RANK, WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, MASTER_PORT = a port free at run time), joins, and reports back
// through a pipe.
#include "executor/rendezvous.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "executor/launch_env.h"
#include "executor/tcp_host_communicator.h"

namespace parallax::executor {
namespace {

int FreePort() {
  SocketFd fd(socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  socklen_t len = sizeof(a);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

std::vector<uint8_t> UniqueIdLikeBlob() {
  std::vector<uint8_t> blob(128);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(i * 37 + 11);
  return blob;
}

//! One rank's run: join, take rank 0's blob, pass a barrier. "ok" or the first error.
std::string RankMain(const EnvMap& env, double timeout_s) {
  auto place = ReadLaunchEnv(env);
  if (!place) return place.error().message;
  auto rv = Rendezvous::Join(place->master_addr, place->master_port, place->rank, place->world_size, timeout_s);
  if (!rv) return rv.error().message;
  auto blob = (*rv)->Broadcast(place->rank == 0 ? UniqueIdLikeBlob() : std::vector<uint8_t>{});
  if (!blob) return blob.error().message;
  if (*blob != UniqueIdLikeBlob()) return "rank " + std::to_string(place->rank) + " received a different blob";
  if (Status s = (*rv)->Barrier(); !s) return s.error().message;
  return "ok";
}

struct RankSpec {
  int rank;
  int world_size;
};

using RankBody = std::function<std::string(const EnvMap&, double)>;

//! Starts one process per spec (all on `port`) running `body` and returns what each reported, in
//! order.
std::vector<std::string> RunRanks(const std::vector<RankSpec>& specs, int port, double timeout_s,
                                  const RankBody& body = RankMain) {
  std::vector<pid_t> pids;
  std::vector<int> reads;
  for (const RankSpec& s : specs) {
    int fds[2];
    if (pipe(fds) != 0) return {"pipe failed"};
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const EnvMap env = {{"RANK", std::to_string(s.rank)},
                          {"WORLD_SIZE", std::to_string(s.world_size)},
                          {"MASTER_ADDR", "127.0.0.1"},
                          {"MASTER_PORT", std::to_string(port)}};
      const std::string out = body(env, timeout_s);
      (void)!write(fds[1], out.data(), out.size());
      close(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    pids.push_back(pid);
    reads.push_back(fds[0]);
  }
  std::vector<std::string> results;
  for (size_t i = 0; i < pids.size(); ++i) {
    std::string out;
    char buf[512];
    for (ssize_t n; (n = read(reads[i], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
    close(reads[i]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    results.push_back(out.empty() ? "rank process died" : out);
  }
  return results;
}

TEST(Rendezvous, EveryRankReceivesRankZerosBlobAndPassesTheBarrier) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const auto results = RunRanks({{0, 4}, {1, 4}, {2, 4}, {3, 4}}, port, 20);
  for (size_t r = 0; r < results.size(); ++r) EXPECT_EQ(results[r], "ok") << "rank " << r;
}

TEST(Rendezvous, RanksStartedBeforeRankZeroRetryUntilItListens) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  // Rank 0 last: the others find nothing listening at first and back off.
  const auto results = RunRanks({{2, 3}, {1, 3}, {0, 3}}, port, 20);
  for (const std::string& r : results) EXPECT_EQ(r, "ok");
}

TEST(Rendezvous, AMissingRankTimesOutNamingItTheAddressAndThePort) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const auto results = RunRanks({{0, 3}, {1, 3}}, port, 1);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  EXPECT_NE(results[0].find("rank 0 waited 1 s for rank(s) [2] to connect"), std::string::npos) << results[0];
  EXPECT_NE(results[0].find(where), std::string::npos) << results[0];
  EXPECT_NE(results[1].find("waited for rank 0"), std::string::npos) << results[1];
  EXPECT_NE(results[1].find(where), std::string::npos) << results[1];
}

TEST(Rendezvous, NoRankZeroIsAnErrorNamingTheAddressItTried) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const auto results = RunRanks({{1, 2}}, port, 1);
  EXPECT_NE(results[0].find("could not reach rank 0 within 1 s"), std::string::npos) << results[0];
  EXPECT_NE(results[0].find("127.0.0.1:" + std::to_string(port)), std::string::npos) << results[0];
}

TEST(Rendezvous, AWrongWorldSizeIsReportedToBothSides) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const auto results = RunRanks({{0, 2}, {1, 3}}, port, 10);
  for (const std::string& r : results) {
    EXPECT_NE(r.find("rank 1 has WORLD_SIZE=3, rank 0 has WORLD_SIZE=2"), std::string::npos) << r;
  }
}

//! Host collectives over the world and over groups split from it: {2,0} and {1,3} (the first
//! member of each group is its root), the world ranks gathered in group order.
std::string HostPlaneMain(const EnvMap& env, double timeout_s) {
  auto place = ReadLaunchEnv(env);
  if (!place) return place.error().message;
  auto rv = Rendezvous::Join(place->master_addr, place->master_port, place->rank, place->world_size, timeout_s);
  if (!rv) return rv.error().message;
  TcpHostCommunicator world(std::move(rv).value(), {0, 1, 2, 3});
  double v[2] = {static_cast<double>(world.rank() + 1), static_cast<double>(10 * world.rank())};
  if (Status s = world.HostAllReduce(v, 2, ReduceOp::kSum); !s) return s.error().message;
  if (v[0] != 10 || v[1] != 60) return "world sum " + std::to_string(v[0]) + "," + std::to_string(v[1]);
  const std::vector<int> members = world.rank() % 2 == 0 ? std::vector<int>{2, 0} : std::vector<int>{1, 3};
  auto group = world.Split(members);
  if (!group) return group.error().message;
  const int32_t me = world.rank();
  int32_t got[2] = {-1, -1};
  if (Status s = (*group)->HostAllGather(&me, got, sizeof(me)); !s) return s.error().message;
  if (got[0] != members[0] || got[1] != members[1] || (*group)->WorldRank(1) != members[1]) {
    return "group gathered " + std::to_string(got[0]) + "," + std::to_string(got[1]);
  }
  double m = me;
  if (Status s = (*group)->HostAllReduce(&m, 1, ReduceOp::kMax); !s) return s.error().message;
  if (m != std::max(members[0], members[1])) return "group max " + std::to_string(m);
  if (Status s = world.Barrier(); !s) return s.error().message;
  return "ok";
}

TEST(TcpHostCommunicator, ReducesGathersAndSplitsAcrossProcessesWithoutMpi) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const auto results = RunRanks({{0, 4}, {1, 4}, {2, 4}, {3, 4}}, port, 20, HostPlaneMain);
  for (size_t r = 0; r < results.size(); ++r) EXPECT_EQ(results[r], "ok") << "rank " << r;
}

TEST(Rendezvous, ASingleRankNeedsNoNetwork) {
  auto rv = Rendezvous::Join("", 1, 0, 1, 1);
  ASSERT_TRUE(rv) << rv.error().message;
  auto blob = (*rv)->Broadcast(UniqueIdLikeBlob());
  ASSERT_TRUE(blob);
  EXPECT_EQ(*blob, UniqueIdLikeBlob());
  EXPECT_TRUE((*rv)->Barrier());
}

}  // namespace
}  // namespace parallax::executor
