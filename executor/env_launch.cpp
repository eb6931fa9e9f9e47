// A launch from torchrun / Kubernetes / Slurm variables without MPI (launch.h): the ranks those
// variables name, joined over the TCP rendezvous.
#include <unistd.h>

#include "executor/launch.h"
#include "executor/launch_env.h"
#include "executor/tcp_host_communicator.h"

namespace parallax::executor {
namespace {

class EnvLaunch final : public LaunchContext {
 public:
  explicit EnvLaunch(Result<LaunchEnv> env) : env_(std::move(env)) {}

  int world_rank() const override { return env_ ? env_->rank : 0; }
  int world_size() const override { return env_ ? env_->world_size : 1; }
  std::string transport() const override { return env_ ? ToString(env_->source) : "single-process"; }

  //! The CPU backend's collectives are MPI's: a multi-process CPU run needs mpirun, and is
  //! refused here rather than run as unconnected single-process copies.
  Result<std::unique_ptr<Communicator>> World(double) override {
    if (!env_) return env_.error();
    const std::string n = std::to_string(env_->world_size);
    return BadInput("this process was started by the " + transport() + " (" + env_->described_by +
                    ") without MPI: multi-process runs of the CPU backend need MPI (start them with mpirun -np " +
                    n + " or srun --mpi=pmix -n " + n + "); the CUDA backend (--backend cuda) runs from this " +
                    "environment over its TCP rendezvous");
  }

  Result<std::unique_ptr<Communicator>> HostWorld(double timeout_s) override {
    if (!env_) return env_.error();
    if (env_->master_addr.empty() || env_->master_port == 0) {
      return BadInput(env_->described_by + ": the rendezvous needs MASTER_ADDR and MASTER_PORT (torchrun sets both; "
                                           "under Slurm MASTER_ADDR defaults to the first host of SLURM_JOB_NODELIST)");
    }
    auto rv = Rendezvous::Join(env_->master_addr, env_->master_port, env_->rank, env_->world_size, timeout_s);
    if (!rv) return rv.error();
    std::vector<int> world(static_cast<size_t>(env_->world_size));
    for (int r = 0; r < env_->world_size; ++r) world[static_cast<size_t>(r)] = r;
    return std::unique_ptr<Communicator>(new TcpHostCommunicator(std::move(rv).value(), std::move(world)));
  }

 private:
  Result<LaunchEnv> env_;
};

}  // namespace

std::string LaunchContext::ThisHost() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::unique_ptr<LaunchContext> EnvLaunchFromEnvironment() {
  auto env = ReadLaunchEnv(ProcessEnv());
  if (env && (env->source == LaunchSource::kNone || env->source == LaunchSource::kMpi || env->world_size == 1)) {
    return nullptr;
  }
  return std::make_unique<EnvLaunch>(std::move(env));
}

}  // namespace parallax::executor
