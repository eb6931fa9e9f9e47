#pragma once
// What gradient compression (model/sync_mode.h CompressionKind) runs on each worker per step: its
// host kernels, on how many elements and how often, and its host-plane exchanges. One definition:
// the executor's compressor (executor/runtime/classic/compression.cpp) runs exactly these kernels
// (executor/runtime/classic/compression_kernels.h, one function per kernel), `calibrate` times
// those functions into the CostDb kernel families named here, and the classic modes' pricing
// (planner/estimate/sync_modes.cpp) sums this list.
//
// A kernel's cost is measured per call, keyed like the memory-bound families (CostDb
// KernelSample): `op` = its family name, `bytes` = units x BytesPerUnit (what one call reads and
// writes, nominally for the compute-bound ones), so the planner interpolates it in log bytes as it
// does every kernel curve.

#include <cstdint>
#include <utility>
#include <vector>

#include "model/cost_db.h"
#include "model/sync_mode.h"

namespace parallax {

enum class CompressionKernel {
  kErrorFeedback,      //!< g += residue of earlier steps; units: elements
  kBf16Encode,         //!< fp32 -> bf16; units: elements
  kBf16Accumulate,     //!< one member's bf16 copy added into the fp32 sum; units: elements, once per member
  kInt8Encode,         //!< per parameter max|g|, then scale, round and residue; units: elements
  kInt8Accumulate,     //!< one member's int8 values times their scales added; units: elements, per member
  kTopKSelect,         //!< the k largest |g| (nth_element over indices), packed, residue; units: elements
  kTopKAccumulate,     //!< one member's (index, value) pairs added; units: pairs, per member
  kAverage,            //!< the sum zeroed before the members are added, divided by them after; units: elements
  kPowerSgdSplit,      //!< entries outside matrices gathered for their dense all-reduce and put back; units: elements
  kPowerSgdProduct,    //!< one of P = M Q, Q = M^T P, M ~ P Q^T (+ residue); units: rows x cols x rank multiply-adds
  kPowerSgdOrthonormalise,  //!< Gram-Schmidt on P's columns; units: rows x rank x rank
};
inline constexpr int kCompressionKernels = 11;

//! The CostDb kernel family of `k` ("compress_bf16_encode", ...).
const char* KernelFamily(CompressionKernel k);
//! Bytes one unit of `k` reads and writes (the KernelSample byte axis).
double BytesPerUnit(CompressionKernel k);
//! Floating-point operations per unit where `k` is compute-bound (the products), else 0.
double FlopsPerUnit(CompressionKernel k);
//! The PowerSGD rank calibrate times the products and orthonormalisation at (per-unit costs are
//! interpolated by size only).
inline constexpr int64_t kCalibratedPowerSgdRank = 4;

struct KernelRun {
  CompressionKernel kernel = CompressionKernel::kAverage;
  double units = 0;  //!< per call
  int64_t calls = 1;
  //! Runs on the worker's own gradient before the step's first exchange: right after its own
  //! backward (and an injected straggler's lag), while the others may still compute or wait.
  bool own = false;
};

//! A host-plane exchange of the step (Communicator::HostAllGather / HostAllReduce).
struct HostExchange {
  CollectiveKind op = CollectiveKind::kAllGather;
  double bytes = 0;  //!< nccl-tests' size: the gathered buffer for an all-gather
  int64_t calls = 1;
};

struct CompressionStep {
  std::vector<KernelRun> kernels;
  std::vector<HostExchange> exchanges;
};

//! One worker's compression per step of `elements` gradient values over `workers` members;
//! `matrices` (rows, cols) are the parameters PowerSGD factorises (both > 1), in model order.
//! Empty for kNone.
CompressionStep CompressionStepOf(const SyncMode& m, double elements, int64_t workers,
                                  const std::vector<std::pair<double, double>>& matrices);
//! top-k's k for `elements` values (ceil(F n), at least 1, at most n).
int64_t TopKCount(double fraction, int64_t elements);

}  // namespace parallax
