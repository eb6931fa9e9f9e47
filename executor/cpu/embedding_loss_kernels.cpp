// Vocab-parallel embedding and the local pieces of vocab-parallel cross-entropy (Megatron-LM):
// the runtime all-reduces the row max and then (sum_exp, target_logit) over the TP group.
#include <algorithm>
#include <cstring>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/kernel_threads.h"
#include "executor/cpu/vector_kernels.h"

namespace parallax::executor {

void CpuBackend::EmbeddingForward(const int32_t* tokens, int64_t n, const float* table, int64_t vocab_begin,
                                  int64_t table_rows, int64_t hidden, float* out) {
  ParallelFor(n, RowGrain(hidden), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = tokens[t] - vocab_begin;
      float* o = out + t * hidden;
      if (r >= 0 && r < table_rows) {
        std::memcpy(o, table + r * hidden, static_cast<size_t>(hidden) * sizeof(float));
      } else {
        std::fill(o, o + hidden, 0.0f);
      }
    }
  });
}

void CpuBackend::EmbeddingBackward(const int32_t* tokens, int64_t n, const float* dout, int64_t vocab_begin,
                                   int64_t table_rows, int64_t hidden, float* dtable) {
  for (int64_t t = 0; t < n; ++t) {
    const int64_t r = tokens[t] - vocab_begin;
    if (r < 0 || r >= table_rows) continue;
    vec::Add(dtable + r * hidden, dout + t * hidden, hidden);
  }
}

void CpuBackend::RowMax(const float* logits, int64_t rows, int64_t cols, float* row_max) {
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row_max[r] = vec::Max(logits + r * cols, cols);
  });
}

void CpuBackend::CrossEntropyStats(const float* logits, int64_t rows, int64_t cols, const float* row_max,
                                   const int32_t* targets, int64_t vocab_begin, float* sum_exp, float* target_logit) {
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* l = logits + r * cols;
      sum_exp[r] = static_cast<float>(vec::SumExpShift(l, cols, row_max[r]));
      const int64_t t = targets[r] - vocab_begin;
      target_logit[r] = (t >= 0 && t < cols) ? l[t] : 0.0f;
    }
  });
}

void CpuBackend::CrossEntropyBackward(const float* logits, int64_t rows, int64_t cols, const float* row_max,
                                      const float* sum_exp, const int32_t* targets, int64_t vocab_begin, float scale,
                                      float* dlogits) {
  ParallelFor(rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* d = dlogits + r * cols;
      vec::ExpShiftScale(logits + r * cols, d, cols, row_max[r], scale / sum_exp[r]);
      const int64_t t = targets[r] - vocab_begin;
      if (t >= 0 && t < cols) d[t] -= scale;
    }
  });
}

}  // namespace parallax::executor
