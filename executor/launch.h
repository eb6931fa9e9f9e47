#pragma once
// The process's place in the job. Started by mpirun / srun with MPI, it is the MPI world. Started
// by torchrun, a Kubernetes operator or Slurm without MPI (launch_env.h), it is the ranks those
// variables name, joined by a TCP rendezvous (rendezvous.h): the CUDA backend runs on it (NCCL
// for tensors), the CPU backend refuses it (its collectives need MPI). Otherwise one process.
// No home-made process manager: the launcher starts the processes.

#include <memory>
#include <string>

#include "executor/backend.h"

namespace parallax::executor {

class LaunchContext {
 public:
  virtual ~LaunchContext() = default;
  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;
  //! "mpi", "single-process", "torchrun environment" or "slurm environment".
  virtual std::string transport() const = 0;
  //! A communicator over every process; every blocking wait gives up after `timeout_s` with
  //! an error naming the rank it waited for.
  virtual Result<std::unique_ptr<Communicator>> World(double timeout_s) = 0;
  //! The host plane over every process (host collectives, splits; no tensors): World() except in
  //! a launch without MPI, where World() refuses and this is the TCP rendezvous.
  virtual Result<std::unique_ptr<Communicator>> HostWorld(double timeout_s) { return World(timeout_s); }
  //! Host name (for error messages).
  virtual std::string host() const { return ThisHost(); }
  static std::string ThisHost();
};

//! A launch from torchrun / Slurm variables when they name more than one process and no MPI
//! launcher started this one; nullptr otherwise. Malformed variables give a launch of one process
//! whose World() and HostWorld() report them.
std::unique_ptr<LaunchContext> EnvLaunchFromEnvironment();

//! Initialises MPI when it is compiled in (MPI_Init_thread, errors returned, not fatal);
//! finalises it when the context is destroyed.
std::unique_ptr<LaunchContext> InitLaunch(int* argc, char*** argv);
//! True when this binary was built with MPI.
bool MpiCompiledIn();
//! A size-1 communicator (the single-process reference; works without MPI).
std::unique_ptr<Communicator> LocalCommunicator();

}  // namespace parallax::executor
