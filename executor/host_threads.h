#pragma once
// How many intra-op threads each rank uses, from how the job's ranks share each node's CPUs.
// Every rank contributes its host name and CPU affinity mask; a CPU in k ranks' masks on one host
// counts 1/k towards each of them, and a rank's fair share is the sum over its CPUs. A rank runs
// floor(share) threads (at least one), so ranks bound to cores get their cores, unbound ranks split
// the node, and ranks that outnumber the CPUs (mpirun --oversubscribe) run one thread each and
// wait by yielding (executor/cpu/wait_policy.h). An explicit count (--threads, or
// OPENBLAS_NUM_THREADS / OMP_NUM_THREADS in the environment) wins over the share.

#include <cstdint>
#include <string>
#include <vector>

#include "executor/backend.h"

namespace parallax::executor {

struct HostThreads {
  int64_t threads = 1;        //!< intra-op threads this rank uses
  int64_t cpus = 1;           //!< CPUs in this process's affinity mask
  int64_t ranks_on_node = 1;  //!< ranks on this rank's host
  double cpu_share = 1;       //!< this rank's fair share of its CPUs
  bool oversubscribed = false;  //!< some rank on this host has less than one CPU to itself
  int64_t node_cpus = 1;        //!< CPUs in the union of this host's ranks' masks
  int64_t node_index = 0;       //!< this rank's place among its host's ranks (by rank)
  std::string source = "auto";  //!< "auto", "--threads", or the environment variable that set it
};

//! One rank's view of its host (what the ranks exchange).
struct HostCpuRecord {
  std::string host;
  std::vector<int> cpus;  //!< CPU ids in the affinity mask
};

//! This process's record (gethostname, sched_getaffinity).
HostCpuRecord LocalHostCpus();

//! The decision for rank `me` given every rank's record. `requested` > 0 is an explicit count
//! (from `source`); 0 means share the CPUs.
HostThreads ShareHostCpus(const std::vector<HostCpuRecord>& ranks, int me, int64_t requested,
                          const std::string& source);

//! Collective over `world`: exchanges the records and decides. `requested` > 0 is --threads; 0
//! reads OPENBLAS_NUM_THREADS, then OMP_NUM_THREADS, then shares the CPUs.
Result<HostThreads> PlanHostThreads(Communicator& world, int64_t requested);

}  // namespace parallax::executor
