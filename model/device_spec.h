#pragma once
// DeviceSpec: one accelerator (or the CPU) with datasheet figures.

#include <cstdint>
#include <string>
#include <vector>

#include "model/json_io.h"

namespace parallax {

enum class DType { kFp32, kTf32, kBf16, kFp16, kFp8 };

//! Dense (non-sparse) peak throughput per data type, TFLOP/s. 0 means not supported.
struct PeakTflops {
  double fp32 = 0;
  double tf32 = 0;
  double bf16 = 0;
  double fp16 = 0;
  double fp8 = 0;
  double fp4 = 0;  //!< dense FP4 (NVFP4 / MXFP4, Blackwell); informational: no precision computes in it
  double For(DType t) const;
};

//! A CTA tile the GEMM library picks from (cuBLAS/CUTLASS kernels of the architecture).
struct GemmTile {
  int64_t m = 128, n = 128, k = 32;  //!< CTA tile; k = one main-loop step
  int64_t stages = 3;                //!< software pipeline depth (fill/drain cost per tile, in k steps)
};

//! Micro-architecture the datasheet peak does not carry; presets cite their sources
//! (model/presets.cpp). A device without it (sm_count 0) gets no tile/wave quantization.
struct Microarch {
  int64_t sm_count = 0;
  double l2_MiB = 0;
  std::vector<GemmTile> gemm_tiles;  //!< candidate CTA tiles; the fastest is taken (cuBLAS heuristics)
  double peak_clock_MHz = 0;         //!< clock the datasheet tensor peak assumes
  double sustained_clock_MHz = 0;    //!< clock under sustained dense MMA at the power limit
  //! Measured maximum sustainable (power-saturated) 16-bit matmul rate, TFLOP/s; 0 = unknown. When
  //! set, the GEMM tile model is scaled so that its best fat shape reaches it (instead of the
  //! clock ratio), since per-clock MMA efficiency is itself below 1 and varies with the clock.
  double sustained_matmul_tflops = 0;
  double sfu_ops_per_clock_per_sm = 0;  //!< special-function (exp) throughput, per SM per clock
  bool warp_specialized_mma = false;  //!< async MMA (wgmma + TMA): softmax overlaps the GEMMs (FA3)
  double dram_fraction = 1.0;         //!< fraction of hbm_GBps a streaming kernel reaches
  //! Fraction of hbm_GBps the passes of an unfused attention core reach (its batched GEMMs that
  //! write or read the s x s scores, the softmax and dropout over them), forward and backward; 0:
  //! dram_fraction. Measured kernels (a CostDb) replace it.
  double unfused_attention_fraction = 0;
  double unfused_attention_bwd_fraction = 0;
  double dram_latency_us = 0;         //!< loaded DRAM latency (Little's law: bytes in flight)
  double kernel_overhead_us = 0;      //!< GPU-side cost of one kernel: launch to first instruction + tail
  int64_t nccl_channels = 0;          //!< SMs NCCL occupies while communication overlaps compute
  //! NVLink SHARP (NVLS): the node's NVSwitches reduce and multicast in the switch, and NCCL runs
  //! an all-reduce inside a node over it when that is faster than its ring (Hopper and later with
  //! third-generation NVSwitch).
  bool nvlink_sharp = false;
  //! Speed of Tri Dao's FlashAttention-2 kernels relative to the fused attention core the model
  //! prices (cuDNN's, FlashAttention-3's): they run the previous generation's MMA without warp
  //! specialization. 0: not measured (priced as the fused kernel). Read with
  //! ImplementationProfile::flash_attention_2.
  double fa2_attention_fraction = 0;
  //! Share of an accumulating GEMM's extra C traffic (fp32 C read, fp32 D written in place of a
  //! 16-bit D: GemmShape::accumulate) that its main loop does not hide, paid at the streaming
  //! bandwidth on top of the tile model; 0 = hidden (or not measured).
  double accumulate_epilogue_fraction = 0;
  double context_reserve_MiB = 0;     //!< CUDA context + loaded modules, outside the allocator
  double blas_workspace_MiB = 0;      //!< cuBLAS/cuBLASLt workspace per handle and stream
};

struct DeviceSpec {
  std::string name;
  PeakTflops peak_tflops;
  double memory_GiB = 0;  //!< usable device memory
  double hbm_GBps = 0;    //!< memory bandwidth, GB/s (1e9 bytes)
  Microarch arch;

  int64_t memory_bytes() const { return static_cast<int64_t>(memory_GiB * 1024.0 * 1024.0 * 1024.0); }
  //! A GPU has SMs; the CPU device (the local-cpu preset, calibrate's CPU cluster) has none.
  bool is_gpu() const { return arch.sm_count > 0; }
};

Result<DeviceSpec> DeviceFromJson(const Json& j, const std::string& file, const std::string& path);
Json DeviceToJson(const DeviceSpec& d);

const char* ToString(DType t);
Result<DType> DTypeFromString(const std::string& s);

}  // namespace parallax
