// DRAM latency of one GPU, unloaded and under load: the figures behind the device microarchitecture's
// dram_latency_us (model/presets.cpp), which prices memory-bound kernels as
// (bytes + bandwidth x latency) / achieved bandwidth (Little's law: the bytes a kernel must keep in
// flight to reach the bandwidth).
//
//   1. Unloaded: one thread follows a random cyclic chain of pointers, one per 128-byte line, over a
//      buffer far larger than L2; each load waits for the previous one. Cycles (clock64) and
//      nanoseconds (%globaltimer) per load.
//   2. Loaded: a streaming read in which every thread keeps `loads` independent 16-byte loads in
//      flight, with 256 to 2048 threads per SM: bytes in flight = threads x loads x 16. Achieved
//      bandwidth (best of 5, CUDA events) and the latency Little's law implies, in flight / bandwidth.
//
// Build and run on the GPU machine (no project libraries needed):
//   nvcc -O3 -arch=sm_90 -o /tmp/dram_latency bench/gpu/dram_latency.cu && /tmp/dram_latency
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace {

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err_));       \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// out: cycles, nanoseconds, and the final index (kept so the chain is not optimised away).
__global__ void Chase(const uint32_t* next, int64_t warm, int64_t loads, uint64_t* out) {
  uint32_t j = 0;
  for (int64_t i = 0; i < warm; ++i) j = next[j];
  const uint64_t c0 = clock64(), t0 = GlobalTimerNs();
  for (int64_t i = 0; i < loads; ++i) j = next[j];
  out[0] = clock64() - c0;
  out[1] = GlobalTimerNs() - t0;
  out[2] = j;
}

template <int kLoads>
__global__ void Stream(const float4* a, size_t n, float* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float acc = 0;
#pragma unroll 1
  for (; i + (kLoads - 1) * stride < n; i += kLoads * stride) {
    float4 v[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) v[k] = a[i + k * stride];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) acc += v[k].x + v[k].y + v[k].z + v[k].w;
  }
  if (acc == 12345.0f) *sink = acc;  // never true on zeroed memory; keeps the loads
}

template <int kLoads>
void Sweep(const float4* a, size_t n, float* sink, int sms, cudaEvent_t e0, cudaEvent_t e1) {
  for (int threads_per_sm : {256, 512, 1024, 2048}) {
    const int blocks = sms * threads_per_sm / 256;
    float best_ms = 1e30f;
    for (int rep = 0; rep < 5; ++rep) {
      CHECK(cudaEventRecord(e0));
      Stream<kLoads><<<blocks, 256>>>(a, n, sink);
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      best_ms = std::min(best_ms, ms);
    }
    const double bytes = static_cast<double>(n) * 16.0;
    const double Bps = bytes / (best_ms * 1e-3);
    const double in_flight = static_cast<double>(sms) * threads_per_sm * kLoads * 16.0;
    std::printf("loaded: %4d threads/SM x %d loads: %6.2f MB in flight, %7.1f GB/s, in flight / bandwidth %6.0f ns\n",
                threads_per_sm, kLoads, in_flight / 1e6, Bps / 1e9, in_flight / Bps * 1e9);
  }
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, sms, prop.l2CacheSize >> 20);

  // 1. Pointer chase over 256 MiB: 2M lines of 128 bytes (32 uint32 each), a random single cycle.
  const int64_t lines = int64_t{1} << 21, words_per_line = 32;
  std::vector<uint32_t> order(static_cast<size_t>(lines));
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937(20261127));
  std::vector<uint32_t> host(static_cast<size_t>(lines * words_per_line), 0);
  for (int64_t i = 0; i < lines; ++i) {
    host[order[static_cast<size_t>(i)] * words_per_line] =
        order[static_cast<size_t>((i + 1) % lines)] * static_cast<uint32_t>(words_per_line);
  }
  uint32_t* chain = nullptr;
  uint64_t* out = nullptr;
  CHECK(cudaMalloc(&chain, host.size() * sizeof(uint32_t)));
  CHECK(cudaMalloc(&out, 3 * sizeof(uint64_t)));
  CHECK(cudaMemcpy(chain, host.data(), host.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  const int64_t loads = 200000;
  Chase<<<1, 1>>>(chain, 4000, loads, out);
  uint64_t r[3] = {};
  CHECK(cudaMemcpy(r, out, sizeof(r), cudaMemcpyDeviceToHost));
  std::printf("unloaded: %.1f cycles, %.1f ns per load (pointer chase over 256 MiB; clock %.0f MHz)\n",
              static_cast<double>(r[0]) / loads, static_cast<double>(r[1]) / loads,
              static_cast<double>(r[0]) * 1e3 / static_cast<double>(r[1]));
  CHECK(cudaFree(chain));

  // 2. Streaming reads of 2 GiB.
  const size_t n = size_t{1} << 27;  // float4 elements
  float4* a = nullptr;
  float* sink = nullptr;
  CHECK(cudaMalloc(&a, n * sizeof(float4)));
  CHECK(cudaMalloc(&sink, sizeof(float)));
  CHECK(cudaMemset(a, 0, n * sizeof(float4)));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  Sweep<1>(a, n, sink, sms, e0, e1);
  Sweep<2>(a, n, sink, sms, e0, e1);
  Sweep<4>(a, n, sink, sms, e0, e1);
  Sweep<8>(a, n, sink, sms, e0, e1);
  CHECK(cudaFree(a));
  CHECK(cudaFree(sink));
  CHECK(cudaFree(out));
  return 0;
}
