// Crash-safe files: the real parallax binary is killed (SIGKILL) at random points while it writes
// each kind of output (plan -o, simulate --trace, run --trace, run's checkpoints), over many runs.
// Afterwards the file at the path is either the previous one or the complete new one, loads, and
// no partial file is left in the folder. rename(2) needs a named source, so a kill in the
// microseconds between naming the complete temporary and renaming it may leave that one complete
// temporary (named after the killed process); the next write of the same file removes it.
// `run --resume` from the checkpoint that survives reproduces the losses of an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model/json_io.h"
#include "model/plan.h"
#include "traces/chrome_reader.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Ended {
  pid_t pid = -1;
  bool killed = false;  //!< true when SIGKILL ended it (not its own exit)
  int exit_code = -1;
  double seconds = 0;
};

// Starts parallax `args` in `dir` (stdout to `keep_stdout`, else discarded) and sends SIGKILL
// `kill_after_s` seconds after it started, or after `armed_by` first exists when given, unless it
// exited first. A negative delay never kills. `seconds` counts from the same origin.
Ended RunAndKill(const std::vector<std::string>& args, const fs::path& dir, double kill_after_s,
                 const fs::path& keep_stdout = {}, const fs::path& armed_by = {}) {
  auto start = Clock::now();
  bool armed = armed_by.empty();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    const std::string out = keep_stdout.empty() ? "/dev/null" : keep_stdout.string();
    if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen("/dev/null", "w", stderr)) ::_exit(127);
    std::vector<char*> argv{const_cast<char*>(PARALLAX_CLI)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(PARALLAX_CLI, argv.data());
    ::_exit(127);
  }
  Ended e;
  e.pid = pid;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (!armed && fs::exists(armed_by)) {
      armed = true;
      start = Clock::now();
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (armed && kill_after_s >= 0 && elapsed >= kill_after_s) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    if (elapsed > 300) {  // a hang is a failure, not a stuck test
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "parallax did not finish within 300 s";
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  e.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  e.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  e.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return e;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::set<std::string> Listing(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.insert(fs::relative(e.path(), dir).string());
  return out;
}

// A temporary of the atomic writers left by process `pid`: ".<file>.tmp.<host>.<pid>.<n>".
bool IsTempOf(const std::string& name, pid_t pid) {
  const std::string base = fs::path(name).filename().string();
  if (base.empty() || base[0] != '.' || base.find(".tmp.") == std::string::npos) return false;
  const size_t last = base.rfind('.');
  std::string tail(1, '.');  // appended piecewise: GCC 12 -Wrestrict misfires on "." + string&&
  tail.append(std::to_string(pid)).push_back('.');
  return last != std::string::npos && last >= tail.size() - 1 &&
         base.compare(last + 1 - tail.size(), tail.size(), tail) == 0 &&
         base.find_first_not_of("0123456789", last + 1) == std::string::npos && last + 1 < base.size();
}

fs::path FreshDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("parallax_kill_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Kill delays spread over [0, the uninterrupted run time]: most land while the process computes
// or writes, some after it finished on a faster run (the new file must then be whole).
std::vector<double> Delays(double full_s, int runs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, full_s);
  std::vector<double> d(static_cast<size_t>(runs));
  for (double& x : d) x = u(rng);
  return d;
}

// The file at `path` after a kill: the previous bytes or the complete new ones, and it loads.
// A measured trace differs from run to run (real timings): any new bytes must then load strictly.
template <class Load>
void ExpectPreviousOrNew(const fs::path& path, const std::string& previous, const std::string& complete,
                         bool deterministic, Load load, const std::string& what) {
  ASSERT_TRUE(fs::exists(path)) << what << ": the file at the path is gone";
  const std::string now = Slurp(path);
  EXPECT_TRUE(now == previous || now == complete || !deterministic)
      << what << ": " << path << " is neither the previous file nor the complete new one (" << now.size()
      << " bytes; previous " << previous.size() << ", complete " << complete.size() << ")";
  EXPECT_TRUE(load(path.string())) << what << ": " << path << " does not load";
}

// One output kind: `args` writes `file` in a folder; each run starts from the previous file.
template <class Load>
void KillWhileWriting(const std::string& name, const std::vector<std::string>& args, const std::string& file,
                      int runs, bool deterministic, Load load) {
  const fs::path dir = FreshDir(name);
  // The complete new output of an uninterrupted run, and a different previous file (an older run's
  // output with its last byte changed: still loadable JSON, never equal to the new bytes).
  const Ended full = RunAndKill(args, dir, -1);
  ASSERT_EQ(full.exit_code, 0) << name << ": the uninterrupted run failed";
  const std::string complete = Slurp(dir / file);
  ASSERT_FALSE(complete.empty());
  std::string previous = complete;
  previous.back() = previous.back() == '\n' ? ' ' : '\n';
  const std::set<std::string> expected_listing = Listing(dir);
  int killed = 0, leftovers = 0;
  // Kill times are fractions of the latest uninterrupted run's length: on a machine whose load
  // changes (CI's two cores), a run far faster than the first would otherwise finish before most
  // kills land.
  double run_s = full.seconds;
  for (const double fraction : Delays(1.0, runs, std::hash<std::string>{}(name))) {
    const double delay = fraction * run_s;
    std::ofstream(dir / file, std::ios::binary | std::ios::trunc) << previous;
    const Ended e = RunAndKill(args, dir, delay);
    killed += e.killed ? 1 : 0;
    if (!e.killed && e.exit_code == 0) run_s = e.seconds;
    if (!e.killed) {
      EXPECT_EQ(e.exit_code, 0) << name << ": a run that was not killed failed";
    }
    ExpectPreviousOrNew(dir / file, previous, complete, deterministic, load, name + " killed after " + std::to_string(delay) + " s");
    // Beyond the expected files: at most one complete temporary of the killed process (a kill
    // between naming it and renaming it over the target).
    int temps = 0;
    for (const std::string& f : Listing(dir)) {
      if (expected_listing.count(f) != 0) continue;
      const bool temp = e.killed && IsTempOf(f, e.pid);
      EXPECT_TRUE(temp) << name << ": " << f << " left behind after a kill at " << delay << " s";
      if (!temp) continue;
      ++temps;
      if (deterministic) {
        EXPECT_EQ(Slurp(dir / f), complete) << name << ": the temporary " << f << " left by a kill is not complete";
      }
      EXPECT_TRUE(load((dir / f).string())) << name << ": the temporary " << f << " does not load";
    }
    EXPECT_LE(temps, 1) << name << ": more than one temporary left after a kill at " << delay << " s";
    leftovers += temps;
    if (::testing::Test::HasFailure()) break;
  }
  // The next write removes what a kill left.
  ASSERT_EQ(RunAndKill(args, dir, -1).exit_code, 0);
  EXPECT_EQ(Listing(dir), expected_listing) << name << ": a temporary survived the next uninterrupted write";
  std::printf("%s: %d runs, %d killed mid-run, %d left a complete temporary, uninterrupted %.2f s\n", name.c_str(), runs,
              killed, leftovers, full.seconds);
  EXPECT_GT(killed, runs / 3) << "kills must land before the process ends, or the test proves little";
  fs::remove_all(dir);
}

bool LoadsAsPlan(const std::string& path) { return static_cast<bool>(LoadPlanFile(path)); }
bool LoadsAsTrace(const std::string& path) { return traces::ReadChromeTrace(path).ok(); }

TEST(KillWhileWriting, PlanOutput) {
  KillWhileWriting("plan", {"plan", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--nodes", "16",
                            "--global-batch", "512", "--top", "3", "-o", "plan.json"},
                   "plan.json", 30, true, LoadsAsPlan);
}

TEST(KillWhileWriting, SimulateTrace) {
  KillWhileWriting("simulate_trace", {"simulate", "--model", "gpt-1.3b", "--cluster", "dgx-a100", "--nodes", "2",
                                      "--plan", "dp=4,tp=2,pp=2,micro_batch=1,global_batch=64", "--all-ranks",
                                      "--trace", "predicted.json"},
                   "predicted.json", 30, true, LoadsAsTrace);
}

TEST(KillWhileWriting, RunTrace) {
  KillWhileWriting("run_trace", {"run", "--plan", "dp=1,micro_batch=2", "--model", "gpt-tiny", "--global-batch",
                                 "8", "--steps", "3", "--trace", "measured.json"},
                   "measured.json", 12, false, LoadsAsTrace);
}

// The one window a kill can leave something: after the complete temporary is named, before it is
// renamed over the target. PARALLAX_FAULT_PUBLISH_PAUSE_MS holds the writer there; the kill lands
// in it every time. The temporary left is complete and named after the killed process, the target
// is still the previous file, and the next write removes the temporary.
TEST(KillWhileWriting, BetweenNamingAndRenamingLeavesOneCompleteTemporaryTheNextWriteRemoves) {
  const fs::path dir = FreshDir("publish_window");
  const std::vector<std::string> args = {"plan", "--model", "gpt-1.3b", "--cluster", "dgx-a100", "--nodes", "1",
                                         "--global-batch", "64", "--top", "1", "-o", "plan.json"};
  ASSERT_EQ(RunAndKill(args, dir, -1).exit_code, 0);
  const std::string complete = Slurp(dir / "plan.json");
  std::string previous = complete;
  previous.back() = previous.back() == '\n' ? ' ' : '\n';
  std::ofstream(dir / "plan.json", std::ios::binary | std::ios::trunc) << previous;
  ::setenv("PARALLAX_FAULT_PUBLISH_PAUSE_MS", "3000", 1);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) ::_exit(127);
    std::vector<char*> argv{const_cast<char*>(PARALLAX_CLI)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(PARALLAX_CLI, argv.data());
    ::_exit(127);
  }
  ::unsetenv("PARALLAX_FAULT_PUBLISH_PAUSE_MS");
  // Wait for the named temporary, then kill.
  std::string temp;
  const auto start = Clock::now();
  while (temp.empty() && std::chrono::duration<double>(Clock::now() - start).count() < 60) {
    for (const std::string& f : Listing(dir)) {
      if (IsTempOf(f, pid)) temp = f;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_FALSE(temp.empty()) << "the writer never named its temporary";
  EXPECT_EQ(Slurp(dir / "plan.json"), previous) << "the target changed before the rename";
  EXPECT_EQ(Slurp(dir / temp), complete) << "the temporary left is not the complete file";
  EXPECT_EQ(Listing(dir), (std::set<std::string>{"plan.json", temp}));
  ASSERT_EQ(RunAndKill(args, dir, -1).exit_code, 0);
  EXPECT_EQ(Listing(dir), std::set<std::string>{"plan.json"}) << "the next write did not remove " << temp;
  EXPECT_EQ(Slurp(dir / "plan.json"), complete);
  fs::remove_all(dir);
}

std::vector<double> Losses(const fs::path& stdout_json) {
  auto j = ParseJsonText(Slurp(stdout_json), stdout_json.string());
  if (!j || !j->contains("losses")) return {};
  return (*j)["losses"].get<std::vector<double>>();
}

int64_t LatestStep(const fs::path& ckpt) {
  const std::string latest = Slurp(ckpt / "latest");
  if (latest.rfind("step_", 0) != 0) return -1;
  return std::atoll(latest.c_str() + 5);
}

TEST(KillWhileWriting, CheckpointsAndResumeReproducesLosses) {
  const fs::path dir = FreshDir("checkpoint");
  constexpr int kSteps = 8;
  const std::vector<std::string> common = {"run", "--plan", "dp=1,micro_batch=2", "--model", "gpt-tiny",
                                           "--global-batch", "8", "--seed", "7", "--json"};
  // Uninterrupted reference losses (no checkpointing).
  std::vector<std::string> ref_args = common;
  ref_args.insert(ref_args.end(), {"--steps", std::to_string(kSteps)});
  ASSERT_EQ(RunAndKill(ref_args, dir, -1, dir / "reference.json").exit_code, 0);
  const std::vector<double> reference = Losses(dir / "reference.json");
  ASSERT_EQ(reference.size(), static_cast<size_t>(kSteps));

  std::vector<std::string> ck_args = common;
  ck_args.insert(ck_args.end(), {"--steps", std::to_string(kSteps), "--checkpoint-dir", "ckpt", "--checkpoint-every", "1"});
  // Kill delays count from the first checkpoint's appearance (process start-up, MPI_Init above
  // all, is slow under sanitizers and writes nothing).
  const fs::path first = dir / "ckpt" / "step_1";
  const Ended full = RunAndKill(ck_args, dir, -1, {}, first);
  ASSERT_EQ(full.exit_code, 0);
  fs::remove_all(dir / "ckpt");

  int killed = 0, resumed = 0;
  for (const double delay : Delays(full.seconds, 12, 20261123)) {
    fs::remove_all(dir / "ckpt");
    const Ended e = RunAndKill(ck_args, dir, delay, {}, first);
    killed += e.killed ? 1 : 0;
    if (!fs::exists(dir / "ckpt" / "latest")) continue;  // killed before the first checkpoint completed
    // Whatever survived: every file is complete and `latest` names a whole step. The only
    // temporary a kill may leave is one complete file of the killed process (see the top).
    for (const std::string& f : Listing(dir / "ckpt")) {
      const bool temp = e.killed && IsTempOf(f, e.pid);
      EXPECT_TRUE(f == "latest" || f.rfind("step_", 0) == 0 || temp) << "left behind: ckpt/" << f << " (kill at " << delay << " s)";
      EXPECT_TRUE(f.find(".tmp") == std::string::npos || temp) << "partial file ckpt/" << f << " (kill at " << delay << " s)";
    }
    const int64_t step = LatestStep(dir / "ckpt");
    ASSERT_GE(step, 1) << "ckpt/latest: " << Slurp(dir / "ckpt" / "latest");
    ASSERT_LE(step, kSteps);
    if (step == kSteps) continue;
    std::vector<std::string> resume_args = common;
    resume_args.insert(resume_args.end(), {"--steps", std::to_string(kSteps - step), "--checkpoint-dir", "ckpt", "--resume"});
    const Ended r = RunAndKill(resume_args, dir, -1, dir / "resumed.json");
    ASSERT_EQ(r.exit_code, 0) << "resume from step " << step << " failed";
    const std::vector<double> losses = Losses(dir / "resumed.json");
    ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps - step));
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], reference[static_cast<size_t>(step) + i], 1e-9 * std::abs(reference[static_cast<size_t>(step) + i]))
          << "step " << step + static_cast<int64_t>(i) << " after resuming from step " << step;
    }
    ++resumed;
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("checkpoint: 12 runs, %d killed mid-run, %d resumed and matched, uninterrupted %.2f s\n", killed, resumed,
              full.seconds);
  EXPECT_GT(resumed, 2) << "too few kills left a checkpoint to resume from";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace parallax
