#pragma once
// cuDNN 9, loaded at run time (dlopen), never linked: the toolkit's copy when it has one, else the
// one PyTorch's wheels bring (nvidia-cudnn-cu13 under a Python site-packages), so a machine whose
// toolkit lacks cuDNN still runs, and one without cuDNN anywhere keeps the GEMM attention path.
// Only cuDNN's own C API is used: the handle calls and the backend (graph) API, cudnn_graph.h.

#include <cudnn_graph.h>

#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::executor::gpu {

//! The cuDNN entry points parallax calls, resolved from one loaded library.
struct CudnnApi {
  std::string path;   //!< the file that was loaded
  size_t version = 0;  //!< cudnnGetVersion(): 90100 for 9.1.0
  decltype(&cudnnGetVersion) GetVersion = nullptr;
  decltype(&cudnnGetErrorString) GetErrorString = nullptr;
  decltype(&cudnnCreate) Create = nullptr;
  decltype(&cudnnDestroy) Destroy = nullptr;
  decltype(&cudnnSetStream) SetStream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) CreateDescriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) DestroyDescriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) SetAttribute = nullptr;
  decltype(&cudnnBackendGetAttribute) GetAttribute = nullptr;
  decltype(&cudnnBackendFinalize) Finalize = nullptr;
  decltype(&cudnnBackendExecute) Execute = nullptr;
};

//! Where cuDNN is looked for, in order: $PARALLAX_CUDNN (a file), the CUDA toolkit's library
//! folders, the system's search path (LD_LIBRARY_PATH, ldconfig), then nvidia/cudnn/lib of every
//! Python site-packages found (the wheel nvidia-cudnn-cu13).
std::vector<std::string> CudnnCandidates();

//! cuDNN loaded once per process (later calls return the same result). The error names every
//! place tried and how to provide cuDNN; cuDNN older than 9 is refused.
Result<const CudnnApi*> LoadCudnn();

}  // namespace parallax::executor::gpu
