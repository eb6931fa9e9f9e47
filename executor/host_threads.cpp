#include "executor/host_threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

namespace parallax::executor {
namespace {

constexpr size_t kHostBytes = 64;
constexpr size_t kMaskBytes = CPU_SETSIZE / 8;
constexpr size_t kRecordBytes = kHostBytes + kMaskBytes;

std::vector<uint8_t> Encode(const HostCpuRecord& r) {
  std::vector<uint8_t> b(kRecordBytes, 0);
  std::memcpy(b.data(), r.host.data(), std::min(r.host.size(), kHostBytes - 1));
  for (int c : r.cpus) {
    if (c >= 0 && c < CPU_SETSIZE) b[kHostBytes + static_cast<size_t>(c) / 8] |= uint8_t(1u << (c % 8));
  }
  return b;
}

HostCpuRecord Decode(const uint8_t* b) {
  HostCpuRecord r;
  r.host.assign(reinterpret_cast<const char*>(b), strnlen(reinterpret_cast<const char*>(b), kHostBytes));
  for (size_t c = 0; c < kMaskBytes * 8; ++c) {
    if (b[kHostBytes + c / 8] & (1u << (c % 8))) r.cpus.push_back(static_cast<int>(c));
  }
  return r;
}

// A positive integer from the environment variable `name`, or 0.
int64_t EnvCount(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (*end == '\0' && n > 0) ? n : 0;
}

}  // namespace

HostCpuRecord LocalHostCpus() {
  HostCpuRecord r;
  char name[kHostBytes] = {};
  gethostname(name, sizeof(name) - 1);
  r.host = name;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) r.cpus.push_back(c);
    }
  }
  if (r.cpus.empty()) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < std::max(1L, n); ++c) r.cpus.push_back(static_cast<int>(c));
  }
  return r;
}

HostThreads ShareHostCpus(const std::vector<HostCpuRecord>& ranks, int me, int64_t requested,
                          const std::string& source) {
  const HostCpuRecord& mine = ranks.at(static_cast<size_t>(me));
  // How many ranks of each host hold each CPU.
  std::map<int, int> holders;
  std::vector<size_t> same_host;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].host != mine.host) continue;
    same_host.push_back(r);
    for (int c : ranks[r].cpus) ++holders[c];
  }
  auto share_of = [&](const HostCpuRecord& rec) {
    double s = 0;
    for (int c : rec.cpus) s += 1.0 / holders[c];
    return s;
  };
  HostThreads t;
  t.cpus = std::max<int64_t>(1, static_cast<int64_t>(mine.cpus.size()));
  t.ranks_on_node = static_cast<int64_t>(same_host.size());
  t.cpu_share = share_of(mine);
  t.node_cpus = std::max<int64_t>(1, static_cast<int64_t>(holders.size()));
  t.node_index = static_cast<int64_t>(std::find(same_host.begin(), same_host.end(), static_cast<size_t>(me)) - same_host.begin());
  for (size_t r : same_host) t.oversubscribed = t.oversubscribed || share_of(ranks[r]) < 1.0 - 1e-9;
  if (requested > 0) {
    t.threads = requested;
    t.source = source;
  } else {
    t.threads = std::max<int64_t>(1, static_cast<int64_t>(std::floor(t.cpu_share + 1e-9)));
    t.source = "auto";
  }
  return t;
}

Result<HostThreads> PlanHostThreads(Communicator& world, int64_t requested) {
  std::string source = "--threads";
  if (requested <= 0) {
    requested = 0;
    for (const char* env : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
      if (const int64_t n = EnvCount(env); n > 0) {
        requested = n;
        source = env;
        break;
      }
    }
  }
  const std::vector<uint8_t> mine = Encode(LocalHostCpus());
  std::vector<uint8_t> all(kRecordBytes * static_cast<size_t>(world.size()));
  if (Status s = world.HostAllGather(mine.data(), all.data(), static_cast<int64_t>(kRecordBytes)); !s) {
    return s.error();
  }
  std::vector<HostCpuRecord> ranks;
  ranks.reserve(static_cast<size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) ranks.push_back(Decode(all.data() + static_cast<size_t>(r) * kRecordBytes));
  return ShareHostCpus(ranks, world.rank(), requested, source);
}

}  // namespace parallax::executor
