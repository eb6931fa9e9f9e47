#pragma once
// PyTorch profiler (Kineto) conventions: which categories are device compute, memory or
// communication, how NCCL kernels are recognised and described, and how an imported trace's
// tracks map onto parallax's rank x stream layout.
//
// Kineto categories: kernel (device; NCCL kernels are communication, others compute),
// gpu_memcpy / gpu_memset (device memory), gpu_user_annotation (device, annotation only),
// cpu_op / cuda_runtime / cuda_driver / user_annotation / python_function (host), ac2g /
// async_cpu_to_gpu / fwdbwd (flows), Trace (the profiler span).

#include <cstdint>
#include <string_view>

#include "traces/trace.h"

namespace parallax::traces {

//! ncclKernel_* and ncclDevKernel_* (the NCCL device kernels of every collective).
bool IsNcclKernel(std::string_view kernel_name);
//! "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "sendrecv", "send", "recv",
//! "alltoall" parsed from an NCCL kernel name, or "" when not recognised.
std::string_view NcclCollectiveFromKernelName(std::string_view kernel_name);
//! The same names from the "Collective name" that PyTorch 2.x records on an NCCL kernel
//! ("allreduce", "_allgather_base", "reduce_scatter_tensor_coalesced", "all_to_allv", ...), or "".
//! NCCL 2.19 and later run many collectives as ncclDevKernel_Generic, a name that says none.
std::string_view NcclCollectiveFromArg(std::string_view collective_name);
//! Bytes per element of a Kineto dtype ("Float" 4, "Half"/"BFloat16" 2, "Double"/"Long" 8, ...);
//! 0 when unknown.
int KinetoDtypeBytes(std::string_view dtype);
//! Kineto's category names for `category`: the names of PyTorch 1.8's Kineto ("Kernel", "Runtime",
//! "Memcpy", "Memset", "Operator", "Python", as torch-tb-profiler still reads them) become today's
//! ("kernel", "cuda_runtime", "gpu_memcpy", "gpu_memset", "cpu_op", "python_function"); any other
//! category is returned as it is.
std::string_view KinetoCategory(std::string_view category);
//! Slice flags (slice_flags::kCompute / kComm / kMemory) for a slice of `category` named `name`.
//! Also understands parallax's own categories ("compute", "tp-comm", "dp-comm", "pp-comm", "comm").
uint8_t SliceFlagsFor(std::string_view category, std::string_view name);
//! Host-side Kineto categories (cpu_op, cuda_runtime, ...; the legacy names too).
bool IsHostCategory(std::string_view category);

//! After reading: sets each track's stream, device flag and rank. A track whose thread name is a
//! Stream name ("compute", "tp-comm", ...) is a parallax track (rank = pid). Otherwise a track
//! with device slices (kernels, memcpy) is a device stream of rank metadata.rank (or its pid when
//! the trace has no distributedInfo): kComm when it runs only NCCL kernels, else kCompute; a
//! track with host categories is kHost; anything else kOther.
void ClassifyTracks(Trace& trace);

//! Kineto -> parallax layout: pid = rank, one thread per original stream named by its kind
//! ("compute", "comm (stream 21)", "host (thread 3113936)"), sorted compute, comm, host. Tracks
//! without a rank keep their pid/tid. Slices, flows and counters are carried over.
Trace ToParallaxLayout(const Trace& trace);

}  // namespace parallax::traces
