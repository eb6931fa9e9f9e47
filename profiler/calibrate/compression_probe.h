#pragma once
// The host kernels of gradient compression (model/compression_kernels.h), timed as the executor
// runs them: each run calls the executor's own kernel function
// (executor/runtime/classic/compression_kernels.h) on buffers of `units` units, filled once with
// seeded values. Every rank runs at once after a barrier (as every worker compresses at once in a
// step), so ranks that share cores share them here too.
//   top-k selection at fraction kCalibratedTopKFraction; the PowerSGD kernels at rank
//   kCalibratedPowerSgdRank, the products on a square matrix, one run = P = M Q, Q = M^T P and
//   M ~ P Q^T, its time a third of theirs (one product's); the split with 1/64 of the elements
//   outside the matrix.

#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/classic/compression_kernels.h"
#include "model/compression_kernels.h"
#include "model/result.h"
#include "profiler/calibrate/backend_timer.h"

namespace parallax::profiler {

inline constexpr double kCalibratedTopKFraction = 0.1;

class CompressionProbe {
 public:
  CompressionProbe(CompressionKernel kernel, int64_t units, executor::Communicator& world, Turns turns = {})
      : kernel_(kernel), units_(units), world_(world), turns_(turns) {}
  //! `n` timed runs, each after a world barrier (one per turn: ranks that outnumber their CPUs run
  //! in turns, backend_timer.h); seconds per call of the kernel.
  Result<std::vector<double>> Measure(int64_t n);
  //! The units one timed call covers (the products round to a square matrix).
  int64_t units() const;
  //! Frees the buffers (the next Measure prepares them again).
  void Release();

 private:
  void Prepare();
  void RunOnce();
  CompressionKernel kernel_;
  int64_t units_;
  executor::Communicator& world_;
  Turns turns_;
  bool prepared_ = false;
  int64_t rows_ = 0, cols_ = 0;  //!< PowerSGD shapes
  std::vector<executor::FlatParam> params_;
  std::vector<float> g_, g0_, sum_, error_;
  std::vector<uint16_t> bf16_;
  std::vector<float> scales_;
  std::vector<int8_t> q8_;
  std::vector<int32_t> index_;
  std::vector<executor::TopKPair> pairs_;
  std::vector<char> in_matrix_;
  std::vector<double> dense_, p_, q_;
};

}  // namespace parallax::profiler
