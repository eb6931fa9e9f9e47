// The temporaries behind atomic writes: names carry host and pid, a dead writer's temporary is
// removed by the next write of the same file, a live one's (or another file's) never is.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "model/atomic_publish.h"
#include "model/json_io.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;

std::set<std::string> Names(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// The pid of a process that has exited and been reaped (so it no longer exists).
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

std::string HostName() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

class AtomicPublish : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("parallax_atomic_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Touch(const std::string& name) { std::ofstream(dir_ / name) << "left"; }
  fs::path dir_;
};

TEST_F(AtomicPublish, TempNamesCarryHostAndPid) {
  const std::string target = (dir_ / "plan.json").string();
  EXPECT_EQ(TempPrefixFor(target),
            (dir_ / (".plan.json.tmp." + HostName() + "." + std::to_string(::getpid()) + ".")).string());
  EXPECT_EQ(TempPrefixFor("plan.json"), ".plan.json.tmp." + HostName() + "." + std::to_string(::getpid()) + ".");
}

TEST_F(AtomicPublish, NextWriteRemovesOnlyDeadWritersTemporariesOfThatFile) {
  const std::string host = HostName();
  const std::string dead = std::to_string(DeadPid());
  const std::string live = std::to_string(::getppid());
  Touch(".plan.json.tmp." + host + "." + dead + ".0");          // dead writer, this file: removed
  Touch(".plan.json.tmp." + host + "." + dead + ".3");          // another attempt of it: removed
  Touch(".plan.json.tmp." + host + "." + live + ".0");          // a live writer: kept
  Touch(".plan.json.tmp.other-host." + dead + ".0");            // another host's writer: kept
  Touch(".trace.json.tmp." + host + "." + dead + ".0");         // another file: kept (until it is written)
  Touch(".plan.json.tmp." + host + ".notapid.0");               // not our pattern: kept
  Touch("plan.json.tmp.12345.0");                               // a user's file: kept
  ASSERT_TRUE(WriteFileAtomic((dir_ / "plan.json").string(), "{}\n").ok());
  EXPECT_EQ(Names(dir_), (std::set<std::string>{"plan.json", ".plan.json.tmp." + host + "." + live + ".0",
                                                 ".plan.json.tmp.other-host." + dead + ".0",
                                                 ".trace.json.tmp." + host + "." + dead + ".0",
                                                 ".plan.json.tmp." + host + ".notapid.0", "plan.json.tmp.12345.0"}));
  EXPECT_EQ(RemoveStaleTemps((dir_ / "trace.json").string()), 1);
  EXPECT_EQ(RemoveStaleTemps((dir_ / "trace.json").string()), 0);
}

TEST_F(AtomicPublish, WriteReplacesTheFileAndLeavesNothingElse) {
  const std::string target = (dir_ / "db.json").string();
  ASSERT_TRUE(WriteFileAtomic(target, "old\n").ok());
  ASSERT_TRUE(WriteFileAtomic(target, "new\n").ok());
  std::ifstream in(target);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "new");
  EXPECT_EQ(Names(dir_), std::set<std::string>{"db.json"});
  EXPECT_EQ(fs::status(target).permissions() & fs::perms::owner_read, fs::perms::owner_read);
}

}  // namespace
}  // namespace parallax
