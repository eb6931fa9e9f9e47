// `mpirun parallax run --trace` for the classic modes (issue 41): the workers' op slices with their
// identities, the exchange on lanes "worker <r> exchange" and "server <s>", and push/pull flows
// from the worker that pushes to the server that receives and back; `trace stats` and `trace diff`
// read the result.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "run_command.h"
#include "traces/chrome_reader.h"

namespace parallax {
namespace {

constexpr int kSteps = 3;

std::filesystem::path Dir() {
  auto dir = std::filesystem::temp_directory_path() / "parallax_classic_trace";
  std::filesystem::create_directories(dir);
  return dir;
}

//! `mpirun -np np parallax run` of gpt-tiny, global batch 8, with `args`; output to `log`. Returns
//! the exit status.
int MpiRun(int np, const std::string& plan, const std::string& args, const std::string& log) {
  // Open MPI refuses root without these (CI containers run as root); other MPIs ignore them.
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  const std::string cmd = std::string(PARALLAX_MPIEXEC) + " --oversubscribe -np " + std::to_string(np) + " " +
                          PARALLAX_CLI + " run --model gpt-tiny --plan " + plan + ",global_batch=8 " + args + " > " +
                          log + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

//! Runs `plan` on `np` ranks for kSteps steps with --trace; returns the trace's path.
std::string TracedRun(const std::string& name, int np, const std::string& plan) {
  std::string trace = (Dir() / (name + ".json")).string();
  std::filesystem::remove(trace);
  const std::string log = (Dir() / (name + ".log")).string();
  EXPECT_EQ(MpiRun(np, plan, "--steps " + std::to_string(kSteps) + " --trace " + trace, log), 0) << "see " << log;
  return trace;
}

std::optional<traces::TrackId> TrackNamed(const traces::Trace& t, int64_t pid, const std::string& name) {
  for (size_t i = 0; i < t.tracks().size(); ++i) {
    if (t.tracks()[i].pid == pid && t.tracks()[i].name == name) return static_cast<traces::TrackId>(i);
  }
  return std::nullopt;
}

//! The name of the slice of `track` that encloses `ns` (the innermost), "" when none does.
std::string Enclosing(const traces::Trace& t, traces::TrackId track, int64_t ns) {
  std::string name;
  int64_t shortest = -1;
  t.slices().ForEach([&](const traces::Slice& s) {
    if (s.track != track || ns < s.start_ns || ns > s.end_ns()) return;
    if (shortest < 0 || s.dur_ns < shortest) {
      shortest = s.dur_ns;
      name = std::string(t.Str(s.name));
    }
  });
  return name;
}

//! Per step, the start of the first op slice of `rank` with that step's identity.
std::map<int64_t, int64_t> StepStarts(const traces::Trace& t, int64_t rank) {
  std::map<int64_t, int64_t> first;
  t.slices().ForEach([&](const traces::Slice& s) {
    if (!s.has(traces::slice_flags::kHasIdentity) || t.track(s.track).pid != rank) return;
    const OpIdentity id = s.identity.Unpack();
    EXPECT_EQ(id.rank, rank) << "an op on rank " << rank << "'s streams carries rank " << id.rank;
    auto [it, fresh] = first.emplace(id.step, s.start_ns);
    if (!fresh) it->second = std::min(it->second, s.start_ns);
  });
  return first;
}

//! Each worker's lane holds, in every step, a push slice from which a "push" flow reaches the
//! server lane of every shard, inside a "receive" slice there; each "pull" flow leaves a "reply"
//! on a server lane and lands in a "pull" slice of the worker's lane. `server_pid[s]`: the rank
//! serving shard s.
void ExpectLanesAndFlows(const traces::Trace& t, int workers, const std::vector<int64_t>& server_pid) {
  std::vector<traces::TrackId> servers;
  for (size_t s = 0; s < server_pid.size(); ++s) {
    auto track = TrackNamed(t, server_pid[s], "server " + std::to_string(s));
    ASSERT_TRUE(track) << "no lane \"server " << s << "\" on rank " << server_pid[s];
    servers.push_back(*track);
  }
  for (int w = 0; w < workers; ++w) {
    auto lane = TrackNamed(t, w, "worker " + std::to_string(w) + " exchange");
    ASSERT_TRUE(lane) << "no lane \"worker " << w << " exchange\"";
    const std::map<int64_t, int64_t> starts = StepStarts(t, w);
    ASSERT_EQ(starts.size(), static_cast<size_t>(kSteps)) << "worker " << w << "'s op slices";
    // [step][shard]: push flows leaving in that step, to that shard.
    std::map<int64_t, std::map<size_t, int>> pushes;
    int pulls = 0;
    t.flows().ForEach([&](const traces::Flow& f) {
      const std::string name(t.Str(f.name));
      if (name == "push" && f.from_track == *lane) {
        EXPECT_EQ(Enclosing(t, f.from_track, f.from_ns), "push");
        EXPECT_EQ(Enclosing(t, f.to_track, f.to_ns), "receive");
        int64_t step = -1;
        for (const auto& [s, ns] : starts) {
          if (ns <= f.from_ns) step = s;
        }
        for (size_t s = 0; s < servers.size(); ++s) {
          if (f.to_track == servers[s]) ++pushes[step][s];
        }
      } else if (name == "pull" && f.to_track == *lane) {
        EXPECT_EQ(Enclosing(t, f.from_track, f.from_ns), "reply");
        EXPECT_EQ(Enclosing(t, f.to_track, f.to_ns), "pull");
        ++pulls;
      }
    });
    for (int64_t step = 0; step < kSteps; ++step) {
      for (size_t s = 0; s < servers.size(); ++s) {
        EXPECT_GE(pushes[step][s], 1) << "worker " << w << ", step " << step << ": no push flow to server " << s;
      }
    }
    EXPECT_EQ(pulls, kSteps * static_cast<int>(servers.size())) << "worker " << w;
  }
}

TEST(ClassicTrace, DedicatedServerRunShowsWorkerAndServerLanesWithPushAndPullFlows) {
  const std::string path = TracedRun("ps_dedicated", 3, "dp=2,sync=ps,servers=1");
  auto t = traces::ReadChromeTrace(path);
  ASSERT_TRUE(t) << t.error().message;
  ExpectLanesAndFlows(*t, 2, {2});
  // The server rank runs no ops: its process holds the server lane alone.
  for (const traces::Track& track : t->tracks()) {
    if (track.pid == 2) {
      EXPECT_EQ(track.name, "server 0");
    }
  }
}

TEST(ClassicTrace, ColocatedServersRunOnTheirHostWorkersLanes) {
  const std::string path = TracedRun("ps_colocated", 2, "dp=2,sync=ps,servers=colocated:2");
  auto t = traces::ReadChromeTrace(path);
  ASSERT_TRUE(t) << t.error().message;
  ExpectLanesAndFlows(*t, 2, {0, 1});
}

TEST(ClassicTrace, BackupWorkersPushToTheCoordinatorAndPullItsBroadcast) {
  constexpr int kWorkers = 2;  // worker 0 coordinates; each step uses the first gradient in
  const std::string path = TracedRun("backup", kWorkers, "dp=2,sync=backup:1");
  auto t = traces::ReadChromeTrace(path);
  ASSERT_TRUE(t) << t.error().message;
  auto coordinator = TrackNamed(*t, 0, "worker 0 exchange");
  ASSERT_TRUE(coordinator);
  for (int w = 1; w < kWorkers; ++w) {
    auto lane = TrackNamed(*t, w, "worker " + std::to_string(w) + " exchange");
    ASSERT_TRUE(lane) << "worker " << w;
    int pushes = 0, pulls = 0;
    t->flows().ForEach([&](const traces::Flow& f) {
      if (f.from_track == *lane && f.to_track == *coordinator) {
        EXPECT_EQ(t->Str(f.name), "push");
        EXPECT_EQ(Enclosing(*t, f.from_track, f.from_ns), "push");
        EXPECT_EQ(Enclosing(*t, f.to_track, f.to_ns), "receive");
        ++pushes;
      } else if (f.from_track == *coordinator && f.to_track == *lane) {
        EXPECT_EQ(t->Str(f.name), "pull");
        EXPECT_EQ(Enclosing(*t, f.from_track, f.from_ns), "broadcast");
        EXPECT_EQ(Enclosing(*t, f.to_track, f.to_ns), "pull");
        ++pulls;
      }
    });
    // A late worker skips the steps it missed, so it may push fewer than kSteps gradients.
    EXPECT_GE(pushes, 1) << "worker " << w;
    EXPECT_GE(pulls, 1) << "worker " << w;
  }
}

TEST(ClassicTrace, StatsAndDiffReadAClassicModeTrace) {
  const std::string path = TracedRun("async", 2, "dp=2,sync=async,servers=colocated:1");
  auto stats = test::RunParallax("trace stats " + path);
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find("worker 1 exchange"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("server 0"), std::string::npos) << stats.out;
  auto diff = test::RunParallax("trace diff " + path + " " + path);
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_NE(diff.out.find("alignment: identity"), std::string::npos) << diff.out;
}

TEST(ClassicTrace, CheckpointsStayRefusedForTheClassicModes) {
  const std::string log = (Dir() / "ckpt.log").string();
  EXPECT_EQ(MpiRun(2, "dp=2,sync=local:2", "--steps 1 --checkpoint-dir " + (Dir() / "ckpt").string(), log), 2);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--checkpoint-dir is not supported with sync=local:2"), std::string::npos) << text;
}

}  // namespace
}  // namespace parallax
