#include "executor/cuda/cuda_check.h"

#include <unistd.h>

#include <cstdlib>

#include "executor/launch_env.h"

namespace parallax::executor::gpu {
namespace {

// The path below the repository root ("executor/cuda/x.cpp"), not the build machine's.
std::string SourcePath(const char* file) {
  const std::string f(file);
  const size_t at = f.rfind("executor/");
  return at == std::string::npos ? f.substr(f.find_last_of('/') + 1) : f.substr(at);
}

}  // namespace

int LaunchRank() {
  const auto env = ReadLaunchEnv(ProcessEnv());
  return env && env->source != LaunchSource::kNone ? env->rank : -1;
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

Error CallError(const char* call, const std::string& what, const char* file, int line) {
  const int rank = LaunchRank();
  std::string who = rank >= 0 ? "rank " + std::to_string(rank) + " on " + HostName() : HostName();
  return Error{who + ": " + call + " failed (" + what + ") at " + SourcePath(file) + ":" + std::to_string(line),
               ErrorKind::kInternal};
}

Error CudaError(cudaError_t e, const char* call, const char* file, int line) {
  return CallError(call, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e), file, line);
}

Error CublasError(cublasStatus_t s, const char* call, const char* file, int line) {
  return CallError(call, cublasLtGetStatusName(s) + std::string(": ") + cublasLtGetStatusString(s), file, line);
}

Error NcclError(ncclResult_t r, const char* call, const char* file, int line) {
  std::string what = ncclGetErrorString(r);
  // NCCL keeps a more precise last message (a peer's address, a timeout) on most failures.
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') what += ": " + std::string(last);
  return CallError(call, what, file, line);
}

}  // namespace parallax::executor::gpu
