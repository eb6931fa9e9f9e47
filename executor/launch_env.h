#pragma once
// The process's place in the job, read from the environment a launcher sets. Precedence: Open MPI
// / PMIx (mpirun, srun --mpi=pmix), then torchrun and the Kubernetes operators (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), then Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID;
// the rendezvous host is the first of SLURM_JOB_NODELIST when MASTER_ADDR is unset, the port
// 20000 + SLURM_JOB_ID mod 20000 when MASTER_PORT is unset). Open MPI's, PMIx's and PMI-2's rank
// variables all mean an MPI launcher (mpirun, srun --mpi=pmix|pmi2). Pure
// functions over an environment map, so they are tested without a launcher.

#include <map>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::executor {

using EnvMap = std::map<std::string, std::string>;

enum class LaunchSource { kNone, kMpi, kTorchrun, kSlurm };
const char* ToString(LaunchSource s);

struct LaunchEnv {
  LaunchSource source = LaunchSource::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  //! The rendezvous address (rank 0's host) and port; empty / 0 when the launcher gave none.
  std::string master_addr;
  int master_port = 0;
  //! The variables the place was read from, for messages ("RANK=1, WORLD_SIZE=4").
  std::string described_by;
};

//! The place in the job; a malformed or contradictory variable is a bad-input error naming it.
//! No launcher variables: rank 0 of 1 (source kNone).
Result<LaunchEnv> ReadLaunchEnv(const EnvMap& env);
//! This process's environment as a map.
EnvMap ProcessEnv();
//! Expands Slurm's compressed host list ("gpu[01-04,07],login1" -> gpu01 gpu02 gpu03 gpu04 gpu07
//! login1; zero padding kept); a malformed list is a bad-input error quoting it.
Result<std::vector<std::string>> ExpandSlurmHostList(const std::string& list);

}  // namespace parallax::executor
