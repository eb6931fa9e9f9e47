#include "executor/launch_env.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not declared by <cstdlib>

namespace parallax::executor {
namespace {

constexpr int kSlurmPortBase = 20000;
constexpr int kSlurmPortSpan = 20000;

const std::string* Find(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

//! A non-negative integer variable; `min` bounds it from below.
Result<int> IntVar(const EnvMap& env, const char* name, int min) {
  const std::string* v = Find(env, name);
  if (v == nullptr) return BadInput(std::string(name) + " is not set");
  int x = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (ec != std::errc() || end != v->data() + v->size() || x < min) {
    return BadInput(std::string(name) + "=" + *v + ": expected an integer >= " + std::to_string(min));
  }
  return x;
}

//! The first variable of `names` that is set, or nullptr.
const char* FirstSet(const EnvMap& env, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (Find(env, n) != nullptr) return n;
  }
  return nullptr;
}

Status ReadPort(const EnvMap& env, LaunchEnv& e) {
  if (Find(env, "MASTER_PORT") == nullptr) return {};
  auto port = IntVar(env, "MASTER_PORT", 1);
  if (!port) return port.error();
  if (*port > 65535) return BadInput("MASTER_PORT=" + std::to_string(*port) + ": expected a port in 1..65535");
  e.master_port = *port;
  return {};
}

Status Check(const LaunchEnv& e) {
  if (e.rank >= e.world_size) {
    return BadInput(e.described_by + ": the rank must be below the world size");
  }
  return {};
}

Result<LaunchEnv> FromMpi(const EnvMap& env) {
  LaunchEnv e;
  e.source = LaunchSource::kMpi;
  const char* rank_var = FirstSet(env, {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
  auto rank = IntVar(env, rank_var, 0);
  if (!rank) return rank.error();
  e.rank = *rank;
  e.described_by = std::string(rank_var) + "=" + std::to_string(e.rank);
  if (Find(env, "OMPI_COMM_WORLD_SIZE") != nullptr) {
    auto size = IntVar(env, "OMPI_COMM_WORLD_SIZE", 1);
    if (!size) return size.error();
    e.world_size = *size;
    e.described_by += ", OMPI_COMM_WORLD_SIZE=" + std::to_string(e.world_size);
  } else if (Find(env, "SLURM_NTASKS") != nullptr) {
    auto size = IntVar(env, "SLURM_NTASKS", 1);
    if (!size) return size.error();
    e.world_size = *size;
  } else {
    e.world_size = e.rank + 1;  // PMIx alone names no size; MPI_Comm_size has it
  }
  if (Find(env, "OMPI_COMM_WORLD_LOCAL_RANK") != nullptr) {
    auto local = IntVar(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    if (!local) return local.error();
    e.local_rank = *local;
  }
  if (Status s = Check(e); !s) return s.error();
  return e;
}

Result<LaunchEnv> FromTorchrun(const EnvMap& env) {
  LaunchEnv e;
  e.source = LaunchSource::kTorchrun;
  auto rank = IntVar(env, "RANK", 0);
  if (!rank) return rank.error();
  auto size = IntVar(env, "WORLD_SIZE", 1);
  if (!size) return size.error();
  e.rank = *rank;
  e.world_size = *size;
  e.described_by = "RANK=" + std::to_string(e.rank) + ", WORLD_SIZE=" + std::to_string(e.world_size);
  if (Find(env, "LOCAL_RANK") != nullptr) {
    auto local = IntVar(env, "LOCAL_RANK", 0);
    if (!local) return local.error();
    e.local_rank = *local;
  }
  if (const std::string* a = Find(env, "MASTER_ADDR")) e.master_addr = *a;
  if (Status s = ReadPort(env, e); !s) return s.error();
  if (Status s = Check(e); !s) return s.error();
  return e;
}

Result<LaunchEnv> FromSlurm(const EnvMap& env) {
  LaunchEnv e;
  e.source = LaunchSource::kSlurm;
  auto rank = IntVar(env, "SLURM_PROCID", 0);
  if (!rank) return rank.error();
  auto size = IntVar(env, "SLURM_NTASKS", 1);
  if (!size) return size.error();
  e.rank = *rank;
  e.world_size = *size;
  e.described_by = "SLURM_PROCID=" + std::to_string(e.rank) + ", SLURM_NTASKS=" + std::to_string(e.world_size);
  if (Find(env, "SLURM_LOCALID") != nullptr) {
    auto local = IntVar(env, "SLURM_LOCALID", 0);
    if (!local) return local.error();
    e.local_rank = *local;
  }
  if (const std::string* a = Find(env, "MASTER_ADDR")) {
    e.master_addr = *a;
  } else if (const char* list_var = FirstSet(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
    auto hosts = ExpandSlurmHostList(*Find(env, list_var));
    if (!hosts) return Error{std::string(list_var) + ": " + hosts.error().message, ErrorKind::kBadInput};
    if (!hosts->empty()) e.master_addr = hosts->front();
  }
  if (Status s = ReadPort(env, e); !s) return s.error();
  if (e.master_port == 0 && Find(env, "SLURM_JOB_ID") != nullptr) {
    // Every task of the job derives the same port; jobs sharing a node differ by their id.
    auto job = IntVar(env, "SLURM_JOB_ID", 0);
    if (!job) return job.error();
    e.master_port = kSlurmPortBase + *job % kSlurmPortSpan;
  }
  if (Status s = Check(e); !s) return s.error();
  return e;
}

//! Appends the hosts of one bracket range list ("01-04,07") with `prefix` and `suffix`.
Status ExpandRanges(const std::string& prefix, const std::string& ranges, const std::string& suffix,
                    std::vector<std::string>& out) {
  size_t pos = 0;
  while (pos <= ranges.size()) {
    const size_t comma = std::min(ranges.find(',', pos), ranges.size());
    const std::string item = ranges.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    const std::string lo_s = item.substr(0, dash);
    const std::string hi_s = dash == std::string::npos ? lo_s : item.substr(dash + 1);
    long lo = 0, hi = 0;
    auto r1 = std::from_chars(lo_s.data(), lo_s.data() + lo_s.size(), lo);
    auto r2 = std::from_chars(hi_s.data(), hi_s.data() + hi_s.size(), hi);
    if (lo_s.empty() || hi_s.empty() || r1.ec != std::errc() || r2.ec != std::errc() ||
        r1.ptr != lo_s.data() + lo_s.size() || r2.ptr != hi_s.data() + hi_s.size() || hi < lo) {
      return BadInput("bad range '" + item + "'");
    }
    const size_t width = lo_s.size();
    for (long i = lo; i <= hi; ++i) {
      std::string n = std::to_string(i);
      if (n.size() < width) n.insert(0, width - n.size(), '0');
      std::string host = prefix;
      host += n;
      host += suffix;
      out.push_back(std::move(host));
    }
    pos = comma + 1;
  }
  return {};
}

}  // namespace

const char* ToString(LaunchSource s) {
  switch (s) {
    case LaunchSource::kNone: return "single-process";
    case LaunchSource::kMpi: return "mpi";
    case LaunchSource::kTorchrun: return "torchrun environment";
    case LaunchSource::kSlurm: return "slurm environment";
  }
  return "?";
}

Result<std::vector<std::string>> ExpandSlurmHostList(const std::string& list) {
  std::vector<std::string> hosts;
  auto fail = [&](const std::string& why) { return BadInput("host list '" + list + "': " + why); };
  size_t pos = 0;
  while (pos < list.size()) {
    // One entry runs to the next comma outside brackets: prefix[ranges]suffix, or a plain name.
    size_t end = pos;
    int depth = 0;
    for (; end < list.size() && (depth > 0 || list[end] != ','); ++end) {
      if (list[end] == '[') ++depth;
      if (list[end] == ']' && --depth < 0) return fail("unbalanced ']'");
    }
    if (depth != 0) return fail("unbalanced '['");
    const std::string entry = list.substr(pos, end - pos);
    if (entry.empty()) return fail("empty host name");
    const size_t open = entry.find('[');
    if (open == std::string::npos) {
      hosts.push_back(entry);
    } else {
      const size_t close = entry.find(']', open);
      if (entry.find('[', open + 1) != std::string::npos) return fail("more than one bracket in '" + entry + "'");
      std::string ranges = entry.substr(open + 1, close - open - 1);
      if (Status s = ExpandRanges(entry.substr(0, open), ranges, entry.substr(close + 1), hosts); !s) {
        return fail(s.error().message);
      }
    }
    pos = end + 1;
  }
  return hosts;
}

Result<LaunchEnv> ReadLaunchEnv(const EnvMap& env) {
  if (FirstSet(env, {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) != nullptr) return FromMpi(env);
  if (FirstSet(env, {"RANK", "WORLD_SIZE"}) != nullptr) return FromTorchrun(env);
  if (FirstSet(env, {"SLURM_PROCID", "SLURM_NTASKS"}) != nullptr) return FromSlurm(env);
  LaunchEnv e;
  e.described_by = "no launcher variables";
  return e;
}

EnvMap ProcessEnv() {
  EnvMap env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string kv = *p;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

}  // namespace parallax::executor
