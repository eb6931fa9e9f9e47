#pragma once
// The process's place in the job. Built with MPI (PARALLAX_WITH_MPI) and started by mpirun, it is
// the MPI world; otherwise one process. Launch is mpirun/srun — no home-made process manager.

#include <memory>
#include <string>

#include "executor/backend.h"

namespace parallax::executor {

class LaunchContext {
 public:
  virtual ~LaunchContext() = default;
  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;
  //! "mpi" or "single-process".
  virtual std::string transport() const = 0;
  //! A communicator over every process; every blocking wait gives up after `timeout_s` with
  //! an error naming the rank it waited for.
  virtual Result<std::unique_ptr<Communicator>> World(double timeout_s) = 0;
  //! Host name (for error messages).
  virtual std::string host() const = 0;
};

//! Initialises MPI when it is compiled in (MPI_Init_thread, errors returned, not fatal);
//! finalises it when the context is destroyed.
std::unique_ptr<LaunchContext> InitLaunch(int* argc, char*** argv);
//! True when this binary was built with MPI.
bool MpiCompiledIn();
//! A size-1 communicator (the single-process reference; works without MPI).
std::unique_ptr<Communicator> LocalCommunicator();

}  // namespace parallax::executor
