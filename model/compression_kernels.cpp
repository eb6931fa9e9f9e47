#include "model/compression_kernels.h"

#include <algorithm>
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
  switch (k) {
    case CompressionKernel::kErrorFeedback: return 12;   // g and residue read, g written
    case CompressionKernel::kBf16Encode: return 6;       // fp32 in, bf16 out
    case CompressionKernel::kBf16Accumulate: return 10;  // bf16 in, the fp32 sum read and written
    case CompressionKernel::kInt8Encode: return 13;      // g read twice (max, round), int8 and residue out
    case CompressionKernel::kInt8Accumulate: return 9;   // int8 in, the sum read and written
    case CompressionKernel::kTopKSelect: return 16;      // residue copy, the index array written and selected over
    case CompressionKernel::kTopKAccumulate: return 16;  // an (index, value) pair in, the sum read and written
    case CompressionKernel::kAverage: return 12;         // zeroed, then read and written divided
    case CompressionKernel::kPowerSgdSplit: return 4;    // one flag pass per element (vectors' copies beside it)
    case CompressionKernel::kPowerSgdProduct: return 8;  // one double operand per multiply-add (nominal)
    case CompressionKernel::kPowerSgdOrthonormalise: return 8;
  }
  return 0;
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
      s.kernels = {{K::kBf16Encode, n, 1}, {K::kBf16Accumulate, n, workers}, {K::kAverage, n, 1}};
      s.exchanges = {{CollectiveKind::kAllGather, w * n * 2, 1}};
      return s;
    case CompressionKind::kInt8:
      // The message's per-parameter scales (4 B per tensor) are left out of its size.
      s.kernels = {{K::kErrorFeedback, n, 1}, {K::kInt8Encode, n, 1}, {K::kInt8Accumulate, n, workers}, {K::kAverage, n, 1}};
      s.exchanges = {{CollectiveKind::kAllGather, w * n, 1}};
      return s;
    case CompressionKind::kTopK: {
      const auto k = static_cast<double>(TopKCount(m.topk_fraction, static_cast<int64_t>(n)));
      s.kernels = {{K::kErrorFeedback, n, 1}, {K::kTopKSelect, n, 1}, {K::kTopKAccumulate, k, workers}, {K::kAverage, n, 1}};
      s.exchanges = {{CollectiveKind::kAllGather, w * k * 8, 1}};
      return s;
    }
    case CompressionKind::kPowerSgd: {
      // Every value as a double in the all-reduces (the executor's MeanInPlace).
      s.kernels = {{K::kErrorFeedback, n, 1}, {K::kPowerSgdSplit, n, 1}};
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
