// dlopen of cuDNN 9 (cudnn_library.h).
#include "executor/cuda/cudnn_library.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <memory>
#include <mutex>

namespace parallax::executor::gpu {
namespace {

// libcudnn.so.9 is cuDNN 9's front library (it loads its engine libraries from its own folder);
// libcudnn_graph.so.9 alone holds the backend API.
constexpr const char* kNames[] = {"libcudnn.so.9", "libcudnn_graph.so.9"};

std::vector<std::string> Glob(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

template <class F>
bool Resolve(void* lib, const char* name, F& fn, std::string* missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return fn != nullptr;
}

Result<CudnnApi> Bind(void* lib, const std::string& path) {
  CudnnApi a;
  a.path = path;
  std::string missing;
  Resolve(lib, "cudnnGetVersion", a.GetVersion, &missing);
  Resolve(lib, "cudnnGetErrorString", a.GetErrorString, &missing);
  Resolve(lib, "cudnnCreate", a.Create, &missing);
  Resolve(lib, "cudnnDestroy", a.Destroy, &missing);
  Resolve(lib, "cudnnSetStream", a.SetStream, &missing);
  Resolve(lib, "cudnnBackendCreateDescriptor", a.CreateDescriptor, &missing);
  Resolve(lib, "cudnnBackendDestroyDescriptor", a.DestroyDescriptor, &missing);
  Resolve(lib, "cudnnBackendSetAttribute", a.SetAttribute, &missing);
  Resolve(lib, "cudnnBackendGetAttribute", a.GetAttribute, &missing);
  Resolve(lib, "cudnnBackendFinalize", a.Finalize, &missing);
  Resolve(lib, "cudnnBackendExecute", a.Execute, &missing);
  if (!missing.empty()) return IoError(path + ": not cuDNN's backend API (missing " + missing + ")");
  a.version = a.GetVersion();
  if (a.version < 90000) {
    return IoError(path + ": cuDNN " + std::to_string(a.version) + " is older than 9 (SDPA needs cuDNN 9)");
  }
  return a;
}

Result<CudnnApi> LoadFirst() {
  std::string tried;
  for (const std::string& c : CudnnCandidates()) {
    void* lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      tried += "\n  " + c + ": " + dlerror();
      continue;
    }
    auto api = Bind(lib, c);
    if (api) return api;  // the library stays loaded for the life of the process
    tried += "\n  " + api.error().message;
    dlclose(lib);
  }
  return IoError(
      "cuDNN 9 not found (tried, in order:" + tried +
      ")\n  install it with the CUDA toolkit, `pip install nvidia-cudnn-cu13`, or set PARALLAX_CUDNN to the file "
      "libcudnn.so.9; the GEMM attention path runs without it");
}

}  // namespace

std::vector<std::string> CudnnCandidates() {
  std::vector<std::string> out;
  if (const char* f = std::getenv("PARALLAX_CUDNN"); f != nullptr && *f != '\0') out.emplace_back(f);
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(std::string(home) + "/lib64");
    dirs.push_back(std::string(home) + "/lib");
  }
  for (const char* d : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"}) {
    dirs.emplace_back(d);
  }
  for (const std::string& d : dirs) {
    for (const char* n : kNames) out.push_back(d + "/" + n);
  }
  for (const char* n : kNames) out.emplace_back(n);  // LD_LIBRARY_PATH, the ldconfig cache
  std::vector<std::string> sites;
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv != nullptr && *venv != '\0') {
    sites.push_back(std::string(venv) + "/lib/python3*/site-packages");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    sites.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
  }
  for (const char* s : {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                        "/usr/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages",
                        "/opt/conda/lib/python3*/site-packages", "/root/.pyenv/versions/*/lib/python3*/site-packages"}) {
    sites.emplace_back(s);
  }
  for (const std::string& s : sites) {
    for (const std::string& lib : Glob(s + "/nvidia/cudnn/lib/libcudnn.so.9")) out.push_back(lib);
  }
  return out;
}

Result<const CudnnApi*> LoadCudnn() {
  static std::once_flag once;
  static std::unique_ptr<Result<CudnnApi>> loaded;
  std::call_once(once, [] { loaded = std::make_unique<Result<CudnnApi>>(LoadFirst()); });
  if (!*loaded) return loaded->error();
  return &loaded->value();
}

}  // namespace parallax::executor::gpu
