#include "model/compression_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace parallax {

const char* KernelFamily(CompressionKernel k) {
  switch (k) {
    case CompressionKernel::kErrorFeedback: return "compress_error_feedback";
    case CompressionKernel::kBf16Encode: return "compress_bf16_encode";
    case CompressionKernel::kBf16Accumulate: return "compress_bf16_accumulate";
    case CompressionKernel::kInt8Encode: return "compress_int8_encode";
    case CompressionKernel::kInt8Accumulate: return "compress_int8_accumulate";
    case CompressionKernel::kTopKSelect: return "compress_topk_select";
    case CompressionKernel::kTopKAccumulate: return "compress_topk_accumulate";
    case CompressionKernel::kAverage: return "compress_average";
    case CompressionKernel::kPowerSgdSplit: return "compress_powersgd_split";
    case CompressionKernel::kPowerSgdProduct: return "compress_powersgd_product";
    case CompressionKernel::kPowerSgdOrthonormalise: return "compress_powersgd_orthonormalise";
  }
  return "compress_unknown";
}

double BytesPerUnit(CompressionKernel k) {
  // By CompressionKernel, in its order.
  static constexpr std::array<double, kCompressionKernels> kBytes = {
      12,  // error feedback: g and residue read, g written
      6,   // bf16 encode: fp32 in, bf16 out
      10,  // bf16 accumulate: bf16 in, the fp32 sum read and written
      13,  // int8 encode: g read twice (max, round), int8 and residue out
      9,   // int8 accumulate: int8 in, the sum read and written
      16,  // top-k select: residue copy, the index array written and selected over
      16,  // top-k accumulate: an (index, value) pair in, the sum read and written
      12,  // average: zeroed, then read and written divided
      4,   // PowerSGD split: one flag pass per element (the vectors' copies beside it)
      8,   // PowerSGD product: one double operand per multiply-add (nominal)
      8,   // orthonormalise: likewise
  };
  return kBytes[static_cast<size_t>(k)];
}

double FlopsPerUnit(CompressionKernel k) {
  return k == CompressionKernel::kPowerSgdProduct || k == CompressionKernel::kPowerSgdOrthonormalise ? 2 : 0;
}

int64_t TopKCount(double fraction, int64_t elements) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(fraction * static_cast<double>(elements))), 1,
                             std::max<int64_t>(elements, 1));
}

CompressionStep CompressionStepOf(const SyncMode& m, double elements, int64_t workers,
                                  const std::vector<std::pair<double, double>>& matrices) {
  using K = CompressionKernel;
  const double n = elements, w = static_cast<double>(workers);
  CompressionStep s;
  switch (m.compression) {
    case CompressionKind::kNone: return s;
    case CompressionKind::kBf16:
      s.kernels = {{K::kBf16Encode, n, 1, true}, {K::kBf16Accumulate, n, workers}, {K::kAverage, n, 1}};
      s.exchanges = {{CollectiveKind::kAllGather, w * n * 2, 1}};
      return s;
    case CompressionKind::kInt8:
      // The message's per-parameter scales (4 B per tensor) are left out of its size.
      s.kernels = {{K::kErrorFeedback, n, 1, true}, {K::kInt8Encode, n, 1, true}, {K::kInt8Accumulate, n, workers}, {K::kAverage, n, 1}};
      s.exchanges = {{CollectiveKind::kAllGather, w * n, 1}};
      return s;
    case CompressionKind::kTopK: {
      const auto k = static_cast<double>(TopKCount(m.topk_fraction, static_cast<int64_t>(n)));
      s.kernels = {{K::kErrorFeedback, n, 1, true}, {K::kTopKSelect, n, 1, true}, {K::kTopKAccumulate, k, workers}, {K::kAverage, n, 1}};
      s.exchanges = {{CollectiveKind::kAllGather, w * k * 8, 1}};
      return s;
    }
    case CompressionKind::kPowerSgd: {
      // Every value as a double in the all-reduces (the executor's MeanInPlace).
      s.kernels = {{K::kErrorFeedback, n, 1, true}, {K::kPowerSgdSplit, n, 1, true}};
      double in_matrices = 0;
      for (const auto& [rows, cols] : matrices) {
        const double r = std::min({static_cast<double>(m.powersgd_rank), rows, cols});
        in_matrices += rows * cols;
        s.kernels.push_back({K::kPowerSgdProduct, rows * cols * r, 3});
        s.kernels.push_back({K::kPowerSgdOrthonormalise, rows * r * r, 1});
        s.exchanges.push_back({CollectiveKind::kAllReduce, rows * r * 8, 1});
        s.exchanges.push_back({CollectiveKind::kAllReduce, cols * r * 8, 1});
      }
      s.exchanges.insert(s.exchanges.begin(), {CollectiveKind::kAllReduce, std::max(0.0, n - in_matrices) * 8, 1});
      return s;
    }
  }
  return s;
}

}  // namespace parallax
