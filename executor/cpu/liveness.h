#pragma once
// Which rank of a stuck collective is gone. Every rank answers "are you alive?" pings whenever it
// waits on MPI (host waits and comm-stream progress call Serve()); when a collective outlives the
// watchdog, the waiting rank pings the group's other members and names those that stay silent: a
// killed rank (no process) and a stopped or hung one (no progress) look the same, and a member
// that is merely waiting elsewhere still answers. Pings travel on a private duplicate of
// MPI_COMM_WORLD, so they never match the job's own messages.

#include <mpi.h>

#include <vector>

namespace parallax::executor {

class Liveness {
 public:
  //! Collective over MPI_COMM_WORLD (duplicates it).
  Liveness();
  ~Liveness();
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  //! Answers every ping that has arrived (non-blocking).
  void Serve();
  //! World ranks among `world_ranks` (self excluded) that do not answer within `grace_s`.
  std::vector<int> Unresponsive(const std::vector<int>& world_ranks, double grace_s);

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int self_ = -1;
  std::vector<MPI_Request> replies_;  //!< answers in flight
};

}  // namespace parallax::executor
