#pragma once
// Gradient compression inside the data-parallel reduction (host plane of the workers'
// communicator): every worker's gradient becomes the workers' mean, as it travelled compressed.
//   bf16      values rounded to bfloat16, all-gathered, summed in fp32
//   int8      per-tensor scale max|g|/127, deterministic rounding, all-gathered; error feedback
//   topk:F    the ceil(F*n) largest |g| of the whole vector as (index, value), all-gathered; error
//             feedback (Lin et al. 2018, Deep Gradient Compression)
//   powersgd  per matrix P = M Q, all-reduce, orthonormalise, Q = M^T P, all-reduce, M ~ P Q^T, Q
//             reused as the next step's start; vectors all-reduced dense; error feedback
//             (Vogels et al. 2019, algorithm 1)
// topk:1 and powersgd at full rank reproduce the uncompressed mean (up to rounding).

#include <array>
#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/classic/compression_kernels.h"
#include "executor/runtime/classic/flat_model.h"
#include "model/compression_kernels.h"
#include "model/sync_mode.h"

namespace parallax::executor {

class GradientCompressor {
 public:
  GradientCompressor(const SyncMode& mode, std::vector<FlatParam> params, int64_t size);
  //! Replaces `grad` (this worker's, flat) by the mean over `comm`'s members, as compressed.
  Status MeanOverWorkers(Communicator& comm, std::vector<float>* grad);
  //! Bytes this worker sent in the last reduction.
  int64_t wire_bytes() const { return wire_bytes_; }
  //! Units each CompressionKernel ran over all reductions so far (calls x units, as
  //! model/compression_kernels.h CompressionStepOf counts them), by the kernel's index.
  const std::array<double, kCompressionKernels>& kernel_units() const { return units_; }

 private:
  Status Bf16(Communicator& comm, std::vector<float>* g);
  Status Int8(Communicator& comm, std::vector<float>* g);
  Status TopK(Communicator& comm, std::vector<float>* g);
  Status PowerSgd(Communicator& comm, std::vector<float>* g);
  Status PowerSgdMatrix(Communicator& comm, const FlatParam& p, size_t index, std::vector<float>* g);
  //! g = the mean of the members' parts: zeroed, `add(r)` for each member r, divided (kAverage).
  template <typename AddMember>
  void AverageMembers(int members, int64_t n, float* g, const AddMember& add);
  void Ran(CompressionKernel k, double units);

  SyncMode mode_;
  std::vector<FlatParam> params_;
  std::vector<float> error_;                //!< error feedback memory (int8, topk, powersgd)
  std::vector<std::vector<double>> q_;      //!< PowerSGD's Q per matrix (warm start)
  int64_t wire_bytes_ = 0;
  // Buffers kept from step to step (a gradient-sized buffer made afresh is fresh pages every time).
  std::vector<uint16_t> bf16_mine_, bf16_all_;
  std::vector<char> bytes_mine_, bytes_all_;  //!< int8's messages
  std::vector<int32_t> topk_index_;
  std::vector<TopKPair> topk_mine_, topk_all_;
  std::vector<char> in_matrix_;  //!< PowerSGD: which entries lie in a factorised matrix
  std::vector<double> dense_;    //!< PowerSGD: the other entries, all-reduced dense
  std::array<double, kCompressionKernels> units_{};
};

}  // namespace parallax::executor
