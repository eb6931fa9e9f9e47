// CudaBackend: device, memory, host copies, streams, events, host waits and the registry entry.
// The kernel entry points live in cuda_kernels.cpp, the communicator in nccl_communicator.cpp.
#include "executor/cuda/cuda_backend.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "executor/cuda/cuda_check.h"
#include "executor/cuda/device_probe.h"
#include "executor/cuda/kernels.h"
#include "executor/cuda/nccl_communicator.h"
#include "executor/launch_env.h"

namespace parallax::executor {

using gpu::K;

namespace {

// Elements converted per chunk by the host copies with a dtype change (bounds the staging buffer).
constexpr int64_t kCopyChunk = int64_t{4} << 20;

}  // namespace

int LocalRankDevice(int device_count) {
  // The launcher's local rank by the one precedence of launch_env.h (torchrun's LOCAL_RANK before
  // SLURM_LOCALID, which is 0 for every worker of one torchrun per node under srun).
  const auto env = ReadLaunchEnv(ProcessEnv());
  const int r = env ? env->local_rank : 0;
  return device_count > 0 ? r % device_count : 0;
}

Result<std::unique_ptr<Backend>> CreateCudaBackend() {
  auto devices = ProbeCudaDevices();
  if (!devices) {
    // Not bad input: the command is right, this machine lacks what it needs (exit status 1).
    return Error{"--backend cuda: no usable GPU on this machine (" + devices.error().message +
                     "); the CUDA backend needs an NVIDIA driver and a CUDA GPU; use --backend cpu",
                 ErrorKind::kIo};
  }
  const int device = LocalRankDevice(static_cast<int>(devices->size()));
  auto b = CudaBackend::Create(device);
  if (!b) {
    return Error{"--backend cuda: could not start the CUDA backend on GPU " + std::to_string(device) + " (" +
                     (*devices)[static_cast<size_t>(device)].name + "): " + b.error().message,
                 ErrorKind::kIo};
  }
  return std::unique_ptr<Backend>(std::move(b).value());
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device) {
  PX_CUDA_TRY(cudaSetDevice(device));
  PX_CUDA_TRY(cudaFree(nullptr));  // creates the context now, so its failure is reported here
  int least = 0, greatest = 0;
  PX_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  std::vector<std::unique_ptr<CudaStream>> streams;
  for (int i = 0; i < kStreamKinds; ++i) {
    const auto kind = static_cast<StreamKind>(i);
    // Communication gets the higher priority so its kernels start as soon as their data is ready
    // (the overlap the planner models).
    const int priority = kind == StreamKind::kCompute ? least : greatest;
    cudaStream_t s = nullptr;
    PX_CUDA_TRY(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority));
    streams.push_back(std::make_unique<CudaStream>(kind, gpu::StreamPtr(s)));
  }
  auto gemm = gpu::LtGemm::Create();
  if (!gemm) return gemm.error();
  int major = 0, minor = 0;
  PX_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  PX_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  auto b = std::unique_ptr<CudaBackend>(new CudaBackend(device, std::move(streams), std::move(gemm).value()));
  b->compute_capability_ = 10 * major + minor;
  if (const char* tf32 = std::getenv("PARALLAX_CUDA_TF32"); tf32 != nullptr && std::string(tf32) == "1") {
    b->set_allow_tf32(true);
  }
  if (const char* attn = std::getenv("PARALLAX_ATTENTION"); attn != nullptr && std::string(attn) == "cudnn") {
    b->set_cudnn_attention(true);
  }
  return b;
}

CudaBackend::CudaBackend(int device, std::vector<std::unique_ptr<CudaStream>> streams,
                         std::unique_ptr<gpu::LtGemm> gemm)
    : device_(device),
      streams_(std::move(streams)),
      gemm_(std::move(gemm)),
      scratch_(12),
      watchdog_(std::make_shared<gpu::CommWatchdog>(600.0)) {}

CudaBackend::~CudaBackend() {
  (void)Synchronize();
  cudnn_.reset();
  for (Tensor& t : scratch_) t.Reset();
  ReleaseCache();
}

void CudaBackend::Fail(Error e) {
  if (failed_.ok()) failed_ = Status(std::move(e));
}

int64_t CudaBackend::DeviceMemoryBytes() const {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(total_bytes);
}

void* CudaBackend::RawAllocate(int64_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it; the base class reports out of memory
    return nullptr;
  }
  if (e != cudaSuccess) {
    Fail(gpu::CudaError(e, "cudaMalloc", __FILE__, __LINE__));
    return nullptr;
  }
  return p;
}

void CudaBackend::RawFree(void* p) { PX_CUDA_RECORD(cudaFree(p)); }

Result<std::unique_ptr<Communicator>> CudaBackend::ConnectWorld(LaunchContext& launch, double timeout_s) {
  return gpu::NcclCommunicator::World(launch, *this, timeout_s);
}

Result<DevPtr> CudaBackend::Scratch(int slot, int64_t numel, DType dtype) {
  Tensor& t = scratch_[static_cast<size_t>(slot)];
  const int64_t bytes = numel * SizeOf(dtype);
  if (t.empty() || t.bytes() < bytes) {
    // The old buffer may still be read by enqueued kernels of this (compute) stream; freeing it
    // returns it to the cache, and any later user is ordered after them on this stream or waits
    // for them through an event.
    t.Reset();
    auto fresh = Allocate((bytes + 3) / 4, DType::kF32, MemoryKind::kWorkspace);
    if (!fresh) return fresh.error();
    t = std::move(fresh).value();
  }
  return DevPtr{t.ptr().ptr, dtype};
}

// ---- host copies -------------------------------------------------------------------------------

void CudaBackend::CopyToDevice(DevPtr dst, const void* host, DType host_type, int64_t count) {
  if (count <= 0) return;
  if (dst.dtype == host_type) {
    PX_CUDA_RECORD(cudaMemcpyAsync(dst.ptr, host, static_cast<size_t>(count * SizeOf(host_type)),
                                   cudaMemcpyHostToDevice, Compute()));
  } else {
    auto staging = Scratch(3, std::min(count, kCopyChunk), host_type);
    if (!staging) return Fail(staging.error());
    for (int64_t off = 0; off < count; off += kCopyChunk) {
      const int64_t len = std::min(kCopyChunk, count - off);
      PX_CUDA_RECORD(cudaMemcpyAsync(staging->ptr, static_cast<const char*>(host) + off * SizeOf(host_type),
                                     static_cast<size_t>(len * SizeOf(host_type)), cudaMemcpyHostToDevice, Compute()));
      PX_CUDA_RECORD(gpu::LaunchConvert(K(dst + off), K(*staging), len, Compute()));
    }
  }
  if (Status s = WaitStream(StreamKind::kCompute); !s) Fail(s.error());
}

void CudaBackend::CopyToHost(void* host, DType host_type, DevPtr src, int64_t count) {
  if (count <= 0) return;
  if (src.dtype == host_type) {
    PX_CUDA_RECORD(cudaMemcpyAsync(host, src.ptr, static_cast<size_t>(count * SizeOf(host_type)),
                                   cudaMemcpyDeviceToHost, Compute()));
    if (Status s = WaitStream(StreamKind::kCompute); !s) Fail(s.error());
    return;
  }
  auto staging = Scratch(3, std::min(count, kCopyChunk), host_type);
  if (!staging) return Fail(staging.error());
  for (int64_t off = 0; off < count; off += kCopyChunk) {
    const int64_t len = std::min(kCopyChunk, count - off);
    PX_CUDA_RECORD(gpu::LaunchConvert(K(*staging), K(src + off), len, Compute()));
    PX_CUDA_RECORD(cudaMemcpyAsync(static_cast<char*>(host) + off * SizeOf(host_type), staging->ptr,
                                   static_cast<size_t>(len * SizeOf(host_type)), cudaMemcpyDeviceToHost, Compute()));
    // The next chunk reuses the staging buffer only after this copy (same stream), and the host
    // buffer is complete once the stream has passed it.
    if (Status s = WaitStream(StreamKind::kCompute); !s) return Fail(s.error());
  }
}

void CudaBackend::CopyBytesToHost(void* host, DevPtr src, int64_t count) {
  if (count <= 0) return;
  PX_CUDA_RECORD(cudaMemcpyAsync(host, src.ptr, static_cast<size_t>(count * SizeOf(src.dtype)), cudaMemcpyDeviceToHost,
                                 Compute()));
  if (Status s = WaitStream(StreamKind::kCompute); !s) Fail(s.error());
}

void CudaBackend::CopyBytesToDevice(DevPtr dst, const void* host, int64_t count) {
  if (count <= 0) return;
  PX_CUDA_RECORD(cudaMemcpyAsync(dst.ptr, host, static_cast<size_t>(count * SizeOf(dst.dtype)), cudaMemcpyHostToDevice,
                                 Compute()));
  if (Status s = WaitStream(StreamKind::kCompute); !s) Fail(s.error());
}

// ---- streams, events and host waits --------------------------------------------------------------

template <class Query>
Status CudaBackend::WaitFor(Query query, const char* what) {
  using Clock = std::chrono::steady_clock;
  auto last_poll = Clock::now();
  for (int64_t spins = 0;; ++spins) {
    const cudaError_t e = query();
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) {
      Fail(gpu::CudaError(e, what, __FILE__, __LINE__));
      return failed_;
    }
    // Spin briefly for latency, then yield and sleep; poll the NCCL watchdog every millisecond.
    if (spins > 64) sched_yield();
    if (spins > 4096) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (Clock::now() - last_poll > std::chrono::milliseconds(1)) {
      last_poll = Clock::now();
      if (Status s = watchdog_->Poll(); !s) {
        Fail(s.error());
        return failed_;
      }
    }
  }
  if (watchdog_->pending() > 0) {
    if (Status s = watchdog_->Poll(); !s) Fail(s.error());
  }
  return failed_;
}

Status CudaBackend::WaitStream(StreamKind s) {
  const cudaStream_t st = raw_stream(s);
  return WaitFor([st] { return cudaStreamQuery(st); }, "cudaStreamQuery");
}

Event CudaBackend::RecordEvent(StreamKind s) {
  int64_t id = -1;
  if (!free_events_.empty()) {
    id = free_events_.back();
    free_events_.pop_back();
  } else {
    cudaEvent_t ev = nullptr;
    const cudaError_t e = cudaEventCreate(&ev);  // timing enabled: EventTimesNs reads them
    if (e != cudaSuccess) {
      Fail(gpu::CudaError(e, "cudaEventCreate", __FILE__, __LINE__));
      return Event{};
    }
    events_.emplace_back(ev);
    id = static_cast<int64_t>(events_.size()) - 1;
  }
  PX_CUDA_RECORD(cudaEventRecord(events_[static_cast<size_t>(id)].get(), raw_stream(s)));
  return Event{id};
}

Status CudaBackend::WaitEvent(StreamKind waiter, Event e) {
  if (!e.valid()) return failed_.ok() ? Status(Error{"WaitEvent: invalid event", ErrorKind::kInternal}) : failed_;
  PX_CUDA_RECORD(cudaStreamWaitEvent(raw_stream(waiter), EventOf(e), 0));
  return failed_;
}

Status CudaBackend::SynchronizeEvent(Event e) {
  if (!e.valid()) return failed_.ok() ? Status(Error{"SynchronizeEvent: invalid event", ErrorKind::kInternal}) : failed_;
  const cudaEvent_t ev = EventOf(e);
  return WaitFor([ev] { return cudaEventQuery(ev); }, "cudaEventQuery");
}

Status CudaBackend::Synchronize() {
  for (int i = 0; i < kStreamKinds; ++i) {
    if (Status s = WaitStream(static_cast<StreamKind>(i)); !s) return s;
  }
  return failed_;
}

Result<std::vector<int64_t>> CudaBackend::EventTimesNs(Event origin, std::span<const Event> events) {
  if (!origin.valid()) return Error{"EventTimesNs: invalid origin event", ErrorKind::kInternal};
  if (Status s = SynchronizeEvent(origin); !s) return s.error();
  std::vector<int64_t> out;
  out.reserve(events.size());
  for (const Event& e : events) {
    if (!e.valid()) return Error{"EventTimesNs: invalid event", ErrorKind::kInternal};
    if (Status s = SynchronizeEvent(e); !s) return s.error();
    float ms = 0;
    const cudaError_t err = cudaEventElapsedTime(&ms, EventOf(origin), EventOf(e));
    if (err != cudaSuccess) return gpu::CudaError(err, "cudaEventElapsedTime", __FILE__, __LINE__);
    out.push_back(static_cast<int64_t>(static_cast<double>(ms) * 1e6));
  }
  return out;
}

void CudaBackend::ReleaseEvents(std::span<const Event> events) {
  for (const Event& e : events) {
    if (e.valid()) free_events_.push_back(e.id);
  }
}

}  // namespace parallax::executor
