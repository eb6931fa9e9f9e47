// Launch under MPI (mpirun / srun): MPI_Init_thread on creation, MPI_Finalize on destruction. A
// process started by torchrun / Slurm variables without an MPI launcher takes the launch from
// the environment instead (launch.h) and never initialises MPI.
#include <mpi.h>

#include "executor/cpu/mpi_communicator.h"
#include "executor/launch.h"

namespace parallax::executor {
namespace {

class MpiLaunch final : public LaunchContext {
 public:
  MpiLaunch(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
      owns_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiLaunch() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }
  MpiLaunch(const MpiLaunch&) = delete;
  MpiLaunch& operator=(const MpiLaunch&) = delete;

  int world_rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string transport() const override { return "mpi"; }
  Result<std::unique_ptr<Communicator>> World(double timeout_s) override {
    auto w = MpiCommunicator::World(timeout_s);
    if (!w) return w.error();
    return std::unique_ptr<Communicator>(std::move(w).value());
  }

 private:
  bool owns_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

bool MpiCompiledIn() { return true; }
std::unique_ptr<LaunchContext> InitLaunch(int* argc, char*** argv) {
  if (auto from_env = EnvLaunchFromEnvironment()) return from_env;
  return std::make_unique<MpiLaunch>(argc, argv);
}

}  // namespace parallax::executor
