// Built without MPI: one process, or the ranks torchrun / Slurm variables name (launch.h).

#include "executor/cpu/local_communicator.h"
#include "executor/launch.h"

namespace parallax::executor {
namespace {

class LocalLaunch final : public LaunchContext {
 public:
  int world_rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string transport() const override { return "single-process"; }
  Result<std::unique_ptr<Communicator>> World(double) override { return LocalCommunicator(); }
};

}  // namespace

bool MpiCompiledIn() { return false; }
std::unique_ptr<LaunchContext> InitLaunch(int*, char***) {
  if (auto from_env = EnvLaunchFromEnvironment()) return from_env;
  return std::make_unique<LocalLaunch>();
}

}  // namespace parallax::executor
